"""The call path of a compiled FX graph that is nothing but one kiln region.

Most graphs compile whole into one region that takes the graph's inputs and returns what the
graph returns, or nearly: a training forward also returns some of its inputs (saved for the
backward), a backward returns None for inputs without a gradient. Calling the region through the
FX graph's generated forward and the region's Python wrapper costs a few microseconds a call (a
batch-1 MLP's whole call takes ~10), so such a graph is called as the region itself: AOTAutograd's
boxed list of inputs goes straight to kiln, and kiln's list of outputs straight back, picked into
the graph's outputs where they differ.
"""

from __future__ import annotations

import operator
from typing import Callable

import torch
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.utils._python_dispatch import _disable_current_modes

from ._fx import RegionCall

_REGION, _INPUT, _NONE = range(3)  # where a graph output comes from


def _sources(call: torch.fx.Node, results, placeholders: list) -> list[tuple[int, int]] | None:
    """(source, index) of each graph output: the region's output index, the graph input's
    position, or None; None when an output is anything else."""
    sources = []
    for r in results:
        if r is None:
            sources.append((_NONE, 0))
        elif r is call and not call.target.returns_tuple:
            sources.append((_REGION, 0))
        elif (isinstance(r, torch.fx.Node) and r.target is operator.getitem
              and r.args[0] is call and call.target.returns_tuple):
            sources.append((_REGION, r.args[1]))
        elif r in placeholders:
            sources.append((_INPUT, placeholders.index(r)))
        else:
            return None
    return sources


def region_runner(gm: torch.fx.GraphModule) -> Callable[[list], list] | None:
    """A boxed callable (takes the list of inputs) that runs `gm`'s one region directly, when
    `gm` is that region alone; otherwise None."""
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    calls = [n for n in nodes if n.op == "call_function" and isinstance(n.target, RegionCall)]
    if len(calls) != 1:
        return None
    call = calls[0]
    region_call: RegionCall = call.target
    if region_call.sizes or call.kwargs or not all(a in placeholders for a in call.args):
        return None
    # Nothing else runs in the graph: only the getitems that take the region's outputs apart.
    if any(n.op not in ("placeholder", "output") and n is not call
           and not (n.target is operator.getitem and n.args[0] is call) for n in nodes):
        return None
    results = next(n for n in nodes if n.op == "output").args[0]
    sources = _sources(call, results, placeholders) if isinstance(results, (tuple, list)) else None
    if sources is None:
        return None
    region = region_call.region
    # The partitioner orders a region's inputs by first use, not as the graph takes them.
    order = [placeholders.index(a) for a in call.args]
    pick = None if order == list(range(len(placeholders))) else operator.itemgetter(*order)
    if len(order) == 1 and pick is not None:
        pick = lambda inputs, i=order[0]: (inputs[i],)  # noqa: E731 (itemgetter of one: no tuple)
    region_outputs = len(call.users) if region_call.returns_tuple else 1
    as_returned = sources == [(_REGION, i) for i in range(region_outputs)]

    def run(inputs: list) -> list:
        tensors = inputs if pick is None else pick(inputs)
        if torch._C._len_torch_dispatch_stack():  # as RegionCall._run: kiln runs beneath modes
            with _disable_current_modes():
                outputs = region.run(tensors)
        else:
            outputs = region.run(tensors)
        if as_returned:
            return outputs
        return [outputs[i] if source == _REGION else inputs[i] if source == _INPUT else None
                for source, i in sources]

    run._boxed_call = True  # AOTAutograd's calling convention: one list of inputs
    return run


def plain_forward(gm: torch.fx.GraphModule):
    """`gm`'s generated forward, without nn.Module's call machinery (about 1.2 us a call): the
    module has no hooks. A lazily recompiled module's forward first calls the module itself."""
    _LazyGraphModule.force_recompile(gm)
    return gm.forward
