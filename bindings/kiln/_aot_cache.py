"""A warm start without AOTAutograd's trace, for inference graphs AOTAutograd only passes through.

AOTAutograd traces every dynamo graph again in every process (ResNet-50: ~0.75 s of a warm first
call, more than kiln's own compile). For an inference graph (grad mode off, autocast off, static
shapes) whose AOTAutograd metadata shows nothing to do at run time (no input mutated, every output
a fresh tensor, no subclass, no effect token, no rng state, no input deduplicated), AOTAutograd's
runtime just calls the compiled graph with the dynamo graph's inputs. kiln then keeps, in its disk
cache, the core-ATen graph AOTAutograd handed it (its nodes through torch.fx's GraphPickler, each
node's value as sizes, strides, dtype and device), keyed by the dynamo graph's code and inputs; a
later process compiles that graph with kiln's own compiler (whose C++ part loads from the same
disk cache) and never calls AOTAutograd.

No weight is in the entry: an inference region freezes the weights it receives at its first
call, so two checkpoints of one architecture share the entry and each runs with its own.

AOTAutograd's own cache (bundled mode, with a backend's OutputCode) is not used: its key hashes
torch's sources and registers Inductor's code generators, ~1 s in a process that has not loaded
Inductor, more than the trace it saves (docs/disk-cache.md).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import pickle
import time
from typing import Any, Callable, NamedTuple

import torch
from torch._functorch._aot_autograd.schemas import OutputType, SubclassCreationMeta
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx._graph_pickler import GraphPickler, Options
from torch.fx._lazy_graph_module import _LazyGraphModule

from . import _C, _partition_cache, _stats

log = logging.getLogger(__name__)

_FORMAT = 3  # of an entry's contents; in the key, so a change misses instead of misreading
# The graph's structure goes through GraphPickler without node metadata; each node's value (what
# kiln reads of it) is written as plain data: GraphPickler's fake tensors cost ~0.1 s to read back
# for ResNet-50's 600 nodes, plain FakeTensors over meta tensors ~10 ms.
_STRUCTURE_ONLY = Options(node_metadata_key_filter=lambda key: False)


class _NotKept(Exception):
    """A node value kiln does not write (a symbolic size, a subclass, an opaque object)."""


def _describe_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, FakeTensor) or value.layout != torch.strided:
            raise _NotKept(type(value).__name__)
        sizes = (*value.shape, *value.stride(), value.storage_offset())
        if not all(type(s) is int for s in sizes):
            raise _NotKept("a symbolic size")
        return ("tensor", tuple(value.shape), value.stride(), value.storage_offset(),
                value.dtype, str(value.device), value.requires_grad)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_describe_value(v) for v in value])
    if value is None or type(value) in (bool, int, float):
        return ("plain", value)
    raise _NotKept(type(value).__name__)


def _rebuild_value(description: Any, fake_mode) -> Any:
    kind, *fields = description
    if kind == "plain":
        return fields[0]
    if kind in ("list", "tuple"):
        values = [_rebuild_value(d, fake_mode) for d in fields[0]]
        return values if kind == "list" else tuple(values)
    shape, stride, offset, dtype, device, requires_grad = fields
    extent = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    meta = torch.empty(offset + extent, dtype=dtype, device="meta").as_strided(shape, stride,
                                                                              offset)
    fake = FakeTensor(fake_mode, meta, torch.device(device))
    return fake.requires_grad_(True) if requires_grad else fake


def _write_graph(gm: torch.fx.GraphModule) -> tuple[bytes, dict]:
    values = {n.name: _describe_value(n.meta["val"]) for n in gm.graph.nodes if "val" in n.meta}
    return GraphPickler.dumps(gm, _STRUCTURE_ONLY), values


def _read_graph(graph: bytes, values: dict, fake_mode) -> torch.fx.GraphModule:
    gm = GraphPickler.loads(graph, fake_mode)
    for node in gm.graph.nodes:
        if node.name in values:
            node.meta["val"] = _rebuild_value(values[node.name], fake_mode)
    # Lazy, as AOTAutograd's graphs are: kiln's passes recompile it after each change.
    return _LazyGraphModule(gm, gm.graph)


# kiln/_backend.py's compiler for inference: (gm, example_inputs, weights, *, record, read) -> a
# boxed callable.
Compile = Callable[..., Callable[[list], Any]]


@functools.cache
def enabled() -> bool:
    """kiln's disk cache is on (KILN_CACHE=0 turns this off with it). Settled when the process
    opens the cache; asked once, since cache_info() also counts the entries on disk."""
    return bool(_C.cache_info()["enabled"])


@functools.cache
def _kiln_identity() -> str:
    """This build of kiln's library and Python package (its sources decompose and partition the
    graph), and torch's version (AOTAutograd traced the graph)."""
    digest = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as source:
                digest.update(name.encode() + b"\0" + source.read() + b"\0")
    return f"{_C.build_id()} {digest.hexdigest()} torch {torch.__version__} " \
           f"{torch.version.git_version}"


def _cacheable_node(node: torch.fx.Node) -> bool:
    """Whether the graph's code names everything the node does: torch's ops and public
    functions, builtins, tensor methods (AOTAutograd's own rule for its cache); attributes and
    submodules are values outside the code."""
    if node.op in ("get_attr", "call_module"):
        return False
    if node.op not in ("call_function", "call_method"):
        return True
    from torch._functorch._aot_autograd.autograd_cache import check_node_safe
    try:
        check_node_safe(node)
    except Exception:  # BypassAOTAutogradCache: a function the code only names
        return False
    return True


def _describe_input(node: torch.fx.Node, value: Any) -> str | None:
    """What AOTAutograd's trace of a graph input depends on, or None where kiln does not cache
    it (a symbolic size, a tensor subclass, a number)."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter) or value.layout != torch.strided:
        return None
    fake = node.meta.get("example_value")
    sizes = list(fake.shape) + list(fake.stride()) if isinstance(fake, torch.Tensor) else []
    if any(isinstance(s, torch.SymInt) for s in sizes):
        return None
    return (f"{value.dtype} {tuple(value.shape)} {value.stride()} {value.storage_offset()} "
            f"{value.device} {value.requires_grad} {type(value).__name__} "
            f"{getattr(value, '_dynamo_static_input_type', None)}")


def graph_key(gm: torch.fx.GraphModule, example_inputs: list, options: dict[str, str]) -> \
        str | None:
    """The disk-cache key of what AOTAutograd makes of `gm` for kiln, or None where kiln does
    not cache it: grad mode or autocast on, a graph holding values outside its code, inputs
    described above."""
    if not enabled() or torch.is_grad_enabled() or torch._C._is_any_autocast_enabled():
        return None
    if any(True for _ in gm.parameters()) or any(True for _ in gm.buffers()):
        return None
    if not all(_cacheable_node(n) for n in gm.graph.nodes):
        return None
    placeholders = gm.graph.find_nodes(op="placeholder")
    if len(placeholders) != len(example_inputs):
        return None
    inputs = [_describe_input(n, v) for n, v in zip(placeholders, example_inputs)]
    if None in inputs:
        return None
    functorch_config = hashlib.sha256(torch._functorch.config.save_config()).hexdigest()
    text = "\n".join([f"kiln aot graph {_FORMAT}", _kiln_identity(), functorch_config,
                      f"inference mode {torch.is_inference_mode_enabled()}",
                      ",".join(f"{k}={v}" for k, v in sorted(options.items())),
                      *inputs, gm.code])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _passes_through(gm: torch.fx.GraphModule, dynamo_inputs: int) -> bool:
    """Whether AOTAutograd's runtime only calls the compiled graph `gm` with the dynamo graph's
    inputs and returns its outputs (its metadata, from the tracing context)."""
    context = torch._guards.TracingContext.try_get()
    meta = getattr(context, "fw_metadata", None)
    if meta is None or meta.is_train:
        return False
    return (len(gm.graph.find_nodes(op="placeholder")) == dynamo_inputs
            and not any(i.mutates_data or i.mutates_metadata or i.mutates_storage_metadata
                        for i in meta.input_info)
            and all(o.output_type == OutputType.non_alias for o in meta.output_info)
            and meta.num_intermediate_bases == 0 and not meta.tokens
            and meta.grad_enabled_mutation is None and not meta.is_rng_op_functionalized
            and not meta.dynamic_outputs and meta.num_graphsafe_rng_states == 0
            and not any(isinstance(m, SubclassCreationMeta)
                        for m in (*meta.subclass_inp_meta, *meta.subclass_fw_graph_out_meta)))


class Entry(NamedTuple):
    """A disk-cache entry of this module: the weights' positions, the core-ATen graph (written by
    _write_graph, pickled) and kiln's partitioning of it (kiln/_partition_cache.py; None where
    kiln did not write it)."""
    weights: frozenset
    graph: bytes
    partitioned: bytes | None


def recording(compile_fn: Compile, key: str, dynamo_inputs: int,
              weights_of: Callable[[], frozenset]) -> Callable:
    """An inference compiler for AOTAutograd: `compile_fn`, storing the graph it gets and how
    kiln partitioned it under `key` where AOTAutograd's runtime passes the graph through."""
    def compile_and_record(gm: torch.fx.GraphModule, example_inputs):
        start = time.perf_counter()
        weights = weights_of()
        graph = None
        if _passes_through(gm, dynamo_inputs):
            try:  # before kiln compiles gm, which changes it
                graph = pickle.dumps(_write_graph(gm))
            except Exception as error:  # an op or value kiln cannot write: not cached
                log.debug("kiln: graph not cached: %s", error)
        _stats.add("aot_cache_seconds", time.perf_counter() - start)
        partitioned = []
        compiled = compile_fn(gm, example_inputs, weights,
                              record=None if graph is None else partitioned.append)
        if graph is not None:
            start = time.perf_counter()
            written = None
            try:
                written = _partition_cache.write(partitioned[0]) if partitioned else None
            except Exception as error:  # a target or constant GraphPickler cannot write
                log.debug("kiln: partitioned graph not cached: %s", error)
            entry = Entry(tuple(sorted(weights)), graph, written)
            _C.store_cache_entry(key, pickle.dumps((_FORMAT, *entry)))
            _stats.add("aot_cache_seconds", time.perf_counter() - start)
        return compiled

    return compile_and_record


def load(key: str) -> Entry | None:
    """The entry stored under `key`; None when there is no usable entry."""
    data = _C.load_cache_entry(key)
    if data is None:
        return None
    try:
        entry_format, *fields = pickle.loads(data)
        if entry_format != _FORMAT:
            return None
        weights, graph, partitioned = fields
        return Entry(frozenset(weights), graph, partitioned)
    except Exception as error:  # written by another torch: compile as if there were none
        log.debug("kiln: cached graph not read: %s", error)
        return None


def compiled(entry: Entry, example_inputs: list, options: dict[str, str],
             compile_fn: Compile) -> Callable | None:
    """The entry's graph compiled, called as the dynamo graph is: with its inputs, returns its
    outputs. Built from kiln's partitioning where the entry has it, else from the core-ATen graph
    (read under dynamo's fake mode); None where neither can be read."""
    run_boxed = None
    if entry.partitioned is not None:
        try:
            run_boxed = compile_fn(None, None, entry.weights, read=lambda name: (
                _partition_cache.read(entry.partitioned, options, name)))
            _stats.add("partitioned_graphs_loaded")
        except Exception as error:  # written by another torch: partition the graph again
            log.debug("kiln: cached partitioned graph not read: %s", error)
    if run_boxed is None:
        start = time.perf_counter()
        fake_mode = torch._guards.detect_fake_mode(example_inputs)
        if fake_mode is None:
            return None
        try:
            gm = _read_graph(*pickle.loads(entry.graph), fake_mode)
        except Exception as error:
            log.debug("kiln: cached graph not read: %s", error)
            return None
        finally:
            _stats.add("aot_cache_seconds", time.perf_counter() - start)
        inputs = [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]
        run_boxed = compile_fn(gm, inputs, entry.weights)
    _stats.add("aot_graphs_loaded")

    def run(*args):
        return run_boxed(list(args))

    return run
