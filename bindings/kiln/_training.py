"""Training graphs run by kiln's own autograd Function instead of AOTAutograd's runtime.

AOTAutograd splits a training graph into a forward and a backward graph, which kiln compiles.
At run time it calls them through layers of Python wrappers that handle what a graph may do:
mutate inputs, return aliases of inputs or intermediates, take tensor subclasses, functionalize
RNG, thread effect tokens, save symbolic sizes. On a small training step those layers cost more
than kiln's fusion saves (docs/torch-compile.md, "Training graphs at run time").

Most training graphs need none of them. For those whose AOTAutograd metadata says so
(`_Layout.of`), kiln calls the two compiled graphs from one torch.autograd.Function:

    forward(ctx, *inputs):  outs = fw(inputs)        (mutated inputs, outputs, saved tensors)
                            copy each mutated input's new value into it (BatchNorm's statistics)
                            save the saved tensors; return the outputs
    backward(ctx, *grads):  bw(saved tensors + the grads of the outputs that need one)

Every other graph keeps AOTAutograd's runtime, unchanged.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch._functorch.config as functorch_config
from torch._dynamo.backends.common import aot_autograd
from torch._functorch._aot_autograd.runtime_wrappers import coerce_to_expected_memory_format
from torch._functorch._aot_autograd.schemas import MutationType, OutputType
from torch._subclasses.fake_tensor import FakeTensor

from . import _stats
from ._errors import KilnError

# KILN_TRAINING_RUNTIME=aot keeps AOTAutograd's runtime for every training graph.
_RUNTIME_VARIABLE = "KILN_TRAINING_RUNTIME"
_RUNTIMES = ("kiln", "aot")
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter, FakeTensor)
_log = logging.getLogger(__name__)
# Outputs the graph computes, as opposed to aliases of its inputs or of other outputs. An
# unsafe_view one (a linear over a 3-D input: addmm's result viewed back to 3-D) is returned as
# a tensor of its own, as AOTAutograd returns it, so that autograd sees no view to guard.
_OWN_OUTPUTS = (OutputType.non_alias, OutputType.unsafe_view_alias)


def runtime_choice() -> str:
    choice = os.environ.get(_RUNTIME_VARIABLE, "kiln").strip().lower() or "kiln"
    if choice not in _RUNTIMES:
        raise KilnError(f"{_RUNTIME_VARIABLE}={choice!r}; allowed: "
                         + ", ".join(repr(c) for c in _RUNTIMES))
    return choice


@dataclass(frozen=True)
class _Layout:
    """Where the forward graph's results go, read off AOTAutograd's metadata. The forward graph
    returns (new values of mutated inputs, outputs, tensors saved for the backward); the backward
    graph takes (saved tensors, the outputs' grads) and returns a grad (or None) per input."""

    mutated_inputs: tuple[int, ...]  # input positions, in the order their new values come
    outputs: slice
    no_grad_outputs: tuple[int, ...]  # outputs that are not differentiable
    unsafe_view_outputs: tuple[int, ...]
    tangent_outputs: tuple[int, ...]  # outputs whose grads the backward graph takes, in order
    tangent_formats: tuple  # AOTAutograd's expected memory format of each such grad
    saved_checked: slice  # saved through save_for_backward: version counters checked
    saved_unchecked: slice  # saved as AOTAutograd saves them without that check
    deterministic: bool | None

    @staticmethod
    def of(metadata, example_inputs, forward_arity: int) -> "_Layout | str":
        """The layout, or why the graph needs AOTAutograd's runtime."""
        # AOTAutograd merges repeated inputs, and aliased inputs one of which is mutated, into
        # fewer forward-graph inputs; its runtime maps them back.
        if forward_arity != len(example_inputs):
            return f"the forward graph takes {forward_arity} of {len(example_inputs)} inputs"
        problem = _why_not(metadata, example_inputs)
        if problem:
            return problem
        mutated = tuple(metadata.mutated_inp_runtime_indices)
        first = len(mutated)
        outputs = metadata.output_info
        tangents = tuple(i for i, info in enumerate(outputs) if info.requires_grad)
        formats = tuple(meta.memory_format for meta in metadata.subclass_tangent_meta)
        if len(formats) != len(tangents):
            return f"{len(formats)} tangent formats for {len(tangents)} differentiable outputs"
        return _Layout(
            mutated_inputs=mutated,
            outputs=slice(first, first + len(outputs)),
            no_grad_outputs=tuple(i for i, info in enumerate(outputs) if not info.requires_grad),
            unsafe_view_outputs=tuple(metadata.unsafe_view_out_indices),
            tangent_outputs=tangents,
            tangent_formats=formats,
            saved_checked=metadata.tensors_saved_for_backwards_with_vc_check_slice,
            saved_unchecked=metadata.tensors_saved_for_backwards_no_vc_check_slice,
            deterministic=metadata.deterministic,
        )


def _why_not(metadata, example_inputs) -> str:
    """Empty when the graph needs nothing of AOTAutograd's runtime but a forward and a backward
    call; otherwise the first thing it needs."""
    if metadata is None:
        return "AOTAutograd gave no metadata"
    if not all(type(x) in _PLAIN_TENSORS for x in example_inputs):
        return "an input is not a plain tensor (a size, a subclass or backward state)"
    if any(isinstance(s, torch.SymInt) for x in example_inputs for s in x.shape):
        return "symbolic sizes"
    if torch._C._is_any_autocast_enabled():
        return "autocast is on"
    if metadata.tokens or metadata.num_backward_tokens:
        return "effect tokens"
    if metadata.is_rng_op_functionalized:
        return "functionalized RNG"
    if metadata.num_intermediate_bases:
        return "outputs that are views of intermediates"
    if metadata.grad_enabled_mutation is not None:
        return "the graph changes grad mode"
    if metadata.num_symints_saved_for_bw or metadata.num_opaque_objects_saved_for_bw:
        return "sizes or objects saved for the backward"
    if metadata.dynamic_saved_tensors_idxs or metadata.dynamic_outputs:
        return "dynamic dims"
    if metadata.indices_of_inputs_that_requires_grad_with_mutations_in_bw:
        return "the backward mutates an input"
    for info in metadata.output_info:
        if info.output_type not in _OWN_OUTPUTS or not issubclass(info.raw_type, torch.Tensor):
            return "an output aliases an input or is not a tensor"
    for index in metadata.mutated_inp_runtime_indices:
        info = metadata.input_info[index]
        if (info.mutates_metadata or not info.mutates_data or info.requires_grad
                or info.mutation_type != MutationType.MUTATED_OUT_GRAPH):
            return "an input mutation other than writing data into a tensor without grad"
    return ""


class _FirstOrderOnly(torch.autograd.Function):
    """A compiled backward graph run where autograd records: its results are connected to the
    tensors it read, and differentiating them raises (as AOTAutograd's runtime does)."""

    @staticmethod
    def forward(ctx, backward_graph, *arguments):
        return tuple(backward_graph(list(arguments)))

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "kiln: a second backward (double backward, e.g. a gradient penalty) through a "
            "compiled training graph is not supported (by any AOTAutograd backend); run the "
            "model code whose gradient is differentiated again outside torch.compile, e.g. "
            "under torch.compiler.disable")


def _autograd_function(forward_graph, backward_graph, layout: _Layout):
    """A torch.autograd.Function over the two compiled (boxed) graphs."""

    class KilnTrainingGraph(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            results = forward_graph(list(inputs))
            # Grad mode is off here: the copies record nothing, as AOTAutograd's do not.
            for index, value in zip(layout.mutated_inputs, results):
                inputs[index].copy_(value)
            # A saved view would keep its base's autograd history alive: save it detached.
            ctx.save_for_backward(*[t.detach() if t._is_view() else t
                                    for t in results[layout.saved_checked]])
            ctx.unchecked = [t.detach() if t._is_view() else t
                             for t in results[layout.saved_unchecked]]
            outputs = list(results[layout.outputs])
            for i in layout.unsafe_view_outputs:
                outputs[i] = torch.ops.aten._unsafe_view(outputs[i], outputs[i].shape)
            ctx.mark_non_differentiable(*[outputs[i] for i in layout.no_grad_outputs])
            return tuple(outputs)

        @staticmethod
        def backward(ctx, *grads):
            if layout.deterministic is False and torch.are_deterministic_algorithms_enabled():
                raise RuntimeError(
                    "kiln: this backward runs with torch.use_deterministic_algorithms(True), but "
                    "its forward was compiled with it off; compile with it on")
            tangents = [coerce_to_expected_memory_format(grads[i], expected)
                        for i, expected in zip(layout.tangent_outputs, layout.tangent_formats)]
            arguments = [*ctx.saved_tensors, *ctx.unchecked, *tangents]
            # Under create_graph the grads depend on the saved tensors (or on the incoming
            # grads), but the compiled backward records nothing: they go through a node whose
            # own backward raises, so a second backward fails instead of dropping its terms.
            # once_differentiable would look at the incoming grads alone and miss the case
            # where only the saved tensors require grad (a gradient penalty on sum(f(x))).
            if torch.is_grad_enabled() and any(
                    isinstance(t, torch.Tensor) and t.requires_grad for t in arguments):
                return _FirstOrderOnly.apply(backward_graph, *arguments)
            return tuple(backward_graph(arguments))

    return KilnTrainingGraph


class _Capture:
    """The compiled forward and backward graphs, as AOTAutograd hands them to kiln."""

    def __init__(self, fw_compiler, bw_compiler):
        self.fw_compiler, self.bw_compiler = fw_compiler, bw_compiler
        self.forward = self.backward = self.metadata = None
        self.forward_arity = 0

    def compile_forward(self, gm, example_inputs):
        self.forward_arity = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
        context = torch._guards.TracingContext.try_get()
        self.metadata = getattr(context, "fw_metadata", None)
        self.forward = self.fw_compiler(gm, example_inputs)
        return self.forward

    def compile_backward(self, gm, example_inputs):
        self.backward = self.bw_compiler(gm, example_inputs)
        return self.backward


def compile_training(gm: torch.fx.GraphModule, example_inputs, *, fw_compiler, bw_compiler,
                     inference_compiler, decompositions):
    """What the backend returns for a graph that dynamo traced with grad mode on: kiln's
    autograd Function over the compiled graphs where the graph allows it (counted in
    kiln.stats()["kiln_autograd_graphs"]), else AOTAutograd's runtime."""
    capture = _Capture(fw_compiler, bw_compiler)
    compiler = aot_autograd(fw_compiler=capture.compile_forward,
                            bw_compiler=capture.compile_backward,
                            inference_compiler=inference_compiler,
                            decompositions=decompositions)
    # The backward is compiled now, not at the first backward call, so that kiln holds it.
    with functorch_config.patch(force_non_lazy_backward_lowering=True):
        general = compiler(gm, example_inputs)
    if capture.forward is None or capture.backward is None:
        return general  # no graph needed a gradient: AOTAutograd compiled it for inference
    layout = _Layout.of(capture.metadata, list(example_inputs), capture.forward_arity)
    if isinstance(layout, str):
        _log.debug("kiln: a training graph keeps AOTAutograd's runtime: %s", layout)
        return general
    _stats.add("kiln_autograd_graphs")
    return _autograd_function(capture.forward, capture.backward, layout).apply
