"""kiln's partitioned graph, written into a disk-cache entry and read back, so that a warm start
skips the partitioning too (kiln/_aot_cache.py keeps it beside the core-ATen graph).

What compile_graph (kiln/_fx.py) makes of a graph: an outer graph that calls kiln regions, with
the ops kiln does not compile between them. It is written as that outer graph (torch.fx's
GraphPickler, without node metadata; each region call a call_module of an empty stub) and, per
region, its program's text (kiln/_fx.py's ProgramText: op names and encoded arguments), the
positions of the weights it freezes and its FX module for the eager fallback. Reading it back
builds each region from its text: no support checks, no partitioner, no FX graph of the region's
ops; the fallback module is read only if a region ever runs eagerly.

ResNet-50 (one region of ~500 ops): reading the core-ATen graph and partitioning it ~85 ms,
reading this entry and building the region from it ~25 ms.
"""

from __future__ import annotations

import pickle
import threading

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx._graph_pickler import GraphPickler, Options

from . import _C, _stats
from ._fx import RegionCall, RegionSource

_STRUCTURE_ONLY = Options(node_metadata_key_filter=lambda key: False)


class _PickledModule:
    """A region's FX module, read from its pickle at its first call (an eager fallback)."""

    def __init__(self, data: bytes):
        self._data = data
        self._module = None
        self._lock = threading.Lock()

    def __call__(self, *args):
        with self._lock:
            if self._module is None:
                module = GraphPickler.loads(self._data, FakeTensorMode())
                module.recompile()  # an unpickled GraphModule has no forward until then
                self._module = module
        return self._module(*args)


def write(gm: torch.fx.GraphModule) -> bytes | None:
    """compile_graph's result `gm` as bytes; None where it holds what this does not write (a
    region left to run eagerly at compile time, an attribute, a target GraphPickler rejects)."""
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    stubs: dict[str, torch.nn.Module] = {}
    regions = {}
    for node in gm.graph.nodes:
        if node.op in ("call_module", "get_attr"):
            return None
        copy = graph.node_copy(node, copies.__getitem__)
        copy.meta = {}
        copies[node] = copy
        if isinstance(node.target, RegionCall):
            call = node.target
            if call.source is None:
                return None
            copy.op, copy.target = "call_module", call.__name__
            stubs[call.__name__] = torch.nn.Module()
            module = GraphPickler.dumps(call.source.module, _STRUCTURE_ONLY)
            regions[call.__name__] = (call.returns_tuple, sorted(call.sizes), call.source.text,
                                      call.source.weights, module)
    outer = torch.fx.GraphModule(stubs, graph)
    eager_ops = gm.meta.get("kiln_eager_ops", 0)
    return pickle.dumps((GraphPickler.dumps(outer, _STRUCTURE_ONLY), regions, eager_ops))


def read(data: bytes, options: dict[str, str], name: str) -> torch.fx.GraphModule:
    """The graph `write` wrote, its regions built anew for this process (named after `name`,
    as compile_graph names them) with `options`."""
    outer, regions, eager_ops = pickle.loads(data)
    gm = GraphPickler.loads(outer, FakeTensorMode())
    calls = {}
    for target, (returns_tuple, sizes, text, weights, module) in regions.items():
        call = RegionCall(None, returns_tuple, target, sizes)
        fallback = _PickledModule(module)
        call.region = _C.Region(text.build(), options, f"{name}-{target}",
                                call.run_eagerly(fallback), weights)
        call.source = RegionSource(text, weights, fallback)
        calls[target] = call
    for node in gm.graph.nodes:
        if node.op == "call_module":
            target = node.target
            node.op, node.target = "call_function", calls[target]
            delattr(gm, target)
    gm.recompile()
    _stats.add("regions", len(calls))
    _stats.add("eager_ops", eager_ops)
    return gm
