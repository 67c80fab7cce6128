"""The torch.compile backend: ``torch.compile(model, backend="kiln", options={...})``.

Dynamo hands over a Torch-level FX graph; AOTAutograd decomposes it to core ATen (less the ops
that kiln/_decompositions.py keeps whole) and splits training graphs into a forward and a
backward graph, and kiln compiles each (kiln/_fx.py). A training graph's two compiled graphs
run from kiln's own autograd Function where AOTAutograd's runtime has nothing to do for it
(kiln/_training.py).
"""

from __future__ import annotations

import itertools
import time
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

from . import (_aot_cache, _cuda_graphs, _decompositions, _direct, _fx, _options, _stats,
               _training)
from ._errors import KilnError

_graph_ids = itertools.count()


def _weight_inputs(kind: str) -> frozenset[int]:
    """Indices of the graph inputs that are the model's parameters and buffers, for an inference
    graph (kiln freezes them: see RegionSource in backend/api/region.h). AOTAutograd knows them
    as the static inputs; a training graph's weights need their gradients and stay inputs."""
    if kind != "inference":
        return frozenset()
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    static = frozenset(getattr(metadata, "static_input_indices", None) or ())
    # A weight the graph itself writes (a compiled optimizer step's parameters) would change
    # after every call: freezing it would only cost a compile.
    mutated = frozenset(getattr(metadata, "mutated_inp_runtime_indices", None) or ())
    return static - mutated


def fx_compiler(options: dict[str, str], kind: str):
    """kiln's compiler for one kind of graph ("forward", "backward", "inference"): takes the
    graph, its example inputs and optionally the positions of the weights to freeze (else
    AOTAutograd's static inputs: _weight_inputs); returns a boxed callable. Two more keywords,
    for kiln/_aot_cache.py: `record` is called with the partitioned graph once kiln compiled
    it (not when a CUDA graph replays it or the graph runs eagerly); `read` (given the graph's
    name) returns such a graph, partitioned before, in place of partitioning `gm`."""
    def compile_fx(gm: torch.fx.GraphModule, example_inputs, weights=None, *, record=None,
                   read=None):
        start = time.perf_counter()
        try:
            return compile_timed(gm, example_inputs, weights, record, read)
        finally:
            _stats.add("python_compile_seconds", time.perf_counter() - start)

    def compile_timed(gm: torch.fx.GraphModule, example_inputs, weights, record, read):
        name = f"graph{next(_graph_ids)}-{kind}"
        if kind != "inference" and options.get("precision") == "bf16":
            raise KilnError(
                f"{name}: precision='bf16' is for inference, but this graph trains (gradients "
                "flow through it); use precision='fp32' to train, or call the model under "
                "torch.no_grad()")
        if read is not None:  # its errors go to the caller, which then compiles `gm`
            compiled = read(name)
            _stats.add("graphs")
            return _boxed(compiled)
        _stats.add("graphs")
        # Inference graphs only: a training forward hands saved tensors to its backward.
        replay = (options.get("mode") == "reduce-overhead" and kind == "inference"
                  and _cuda_graphs.can_replay(gm, example_inputs))
        # A replayed CUDA graph runs no host code, so nothing could check that a frozen weight
        # is unchanged: its weights stay inputs (copied into the graph's buffers every call).
        if replay:
            weights = frozenset()
        elif weights is None:
            weights = _weight_inputs(kind)
        try:
            compiled = _fx.compile_graph(gm, options, name, weights)
        except Exception as error:  # any failure: this graph runs eagerly, once warned
            if options.get("strict") == "true":
                raise
            warnings.warn(f"kiln: {name} could not be compiled and runs eagerly: {error}",
                          stacklevel=2)
            _stats.add("graph_fallbacks")
            return _boxed(gm)
        if replay:
            return make_boxed_func(_cuda_graphs.CudaGraphReplay(compiled))
        if record is not None:
            record(compiled)
        return _boxed(compiled)

    return compile_fx


def _boxed(compiled: torch.fx.GraphModule):
    """A partitioned graph as AOTAutograd calls it: one list of inputs."""
    direct = _direct.region_runner(compiled)
    if direct is not None:
        return direct
    return make_boxed_func(_direct.plain_forward(compiled))


def _cuda_unavailable_reason() -> str:
    if torch.version.cuda is None:
        return f"this PyTorch ({torch.__version__}) was built without CUDA"
    return f"PyTorch {torch.__version__} has CUDA {torch.version.cuda} but finds no GPU"


def backend(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
            options: dict | None = None):
    """kiln as a torch.compile backend (registered under the name "kiln" by an entry point).

    ``mode`` is torch.compile's mode string (default, reduce-overhead, max-autotune,
    max-autotune-no-cudagraphs); ``options`` takes kiln's option keys (kiln.option_keys()).
    Both are validated here: an unknown key or a bad value raises KilnError naming it. The
    caller's dict is copied, never changed.
    """
    values = _options.normalize(options, mode)
    if values.get("target") == "cuda" and not torch.cuda.is_available():
        raise KilnError("target=cuda, but CUDA is not available in this process ("
                        + _cuda_unavailable_reason() + "); allowed here: target=auto or target=cpu")
    inference = not torch.is_grad_enabled()  # dynamo guards on grad mode
    if inference:
        _decompositions.keep_interpolate_whole(gm)
    kinds = {"fw_compiler": "forward", "bw_compiler": "backward",
             "inference_compiler": "inference"}
    compilers = {arg: fx_compiler(values, kind) for arg, kind in kinds.items()}
    start = time.perf_counter()
    key = _aot_cache.graph_key(gm, example_inputs, values) if inference else None
    if key is not None:
        # A warm start compiles the graph AOTAutograd made of this one before (kiln/_aot_cache.py).
        entry = _aot_cache.load(key)
        _stats.add("aot_cache_seconds", time.perf_counter() - start)
        run = None if entry is None else _aot_cache.compiled(
            entry, example_inputs, values, compilers["inference_compiler"])
        if run is not None:
            return run
        compilers["inference_compiler"] = _aot_cache.recording(
            compilers["inference_compiler"], key, len(example_inputs),
            lambda: _weight_inputs("inference"))
    decompositions = _decompositions.decomposition_table(
        _decompositions.runs_on_cpu(example_inputs, values.get("target")), inference)
    if not inference and _training.runtime_choice() == "kiln":
        return _training.compile_training(gm, example_inputs, **compilers,
                                          decompositions=decompositions)
    return aot_autograd(**compilers, decompositions=decompositions)(gm, example_inputs)
