"""mode="reduce-overhead" on CUDA: a compiled graph replayed as one CUDA graph.

With static shapes (torch.compile guards on them) a graph whose inputs are all CUDA tensors is
run twice on a side stream (NVRTC compiles and the driver loads kiln's kernels, the caching
allocator warms up), then captured once into a torch.cuda.CUDAGraph. Every call copies its
inputs into the captured input buffers, replays the graph (one launch for all of kiln's kernels
and ATen's) and returns copies of the captured outputs, so a later call never overwrites a
result the caller holds.

Not replayed: graphs with CPU or symbolic-shaped inputs, graphs that update an input in place
(the copy would be updated, not the caller's tensor), and training graphs (autograd saves
tensors between the forward and the backward graph).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from . import _stats


def _mutates_an_input(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and schema is not None and schema.is_mutable:
            return True
    return False


def can_replay(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """Whether the graph can be replayed as a CUDA graph."""
    if not torch.cuda.is_available() or _mutates_an_input(gm):
        return False
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    if not tensors or len(tensors) != len(example_inputs):
        return False
    return all(t.is_cuda and not any(isinstance(s, torch.SymInt) for s in t.shape)
               for t in tensors)


class CudaGraphReplay:
    """Calls `fn` through a CUDA graph captured at the first call (unboxed calling convention)."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn
        self._graph: torch.cuda.CUDAGraph | None = None
        self._inputs: list[torch.Tensor] = []
        self._outputs: Any = None

    def _capture(self, args) -> None:
        self._inputs = [a.detach().clone() for a in args]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._fn(*self._inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._outputs = self._fn(*self._inputs)
        self._graph = graph
        _stats.add("cuda_graphs")

    def __call__(self, *args):
        if self._graph is None:
            self._capture(args)
        for buffer, arg in zip(self._inputs, args):
            if buffer.data_ptr() != arg.data_ptr():
                buffer.copy_(arg)
        self._graph.replay()
        outputs = self._outputs
        if isinstance(outputs, torch.Tensor):
            return outputs.clone()
        return type(outputs)(o.clone() if isinstance(o, torch.Tensor) else o for o in outputs)
