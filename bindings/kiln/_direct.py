"""The call path of a compiled FX graph that is nothing but one kiln region.

Most inference graphs compile whole into one region that takes the graph's inputs in order and
returns what the graph returns. Calling it through the FX graph's generated forward and the
region's Python wrapper costs a few microseconds a call (a batch-1 MLP's whole call takes ~10),
so such a graph is called as the region itself: AOTAutograd's boxed list of inputs goes straight
to kiln, and kiln's list of outputs straight back.
"""

from __future__ import annotations

import operator
from typing import Callable

import torch
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.utils._python_dispatch import _disable_current_modes

from ._fx import RegionCall


def _region_outputs(call: torch.fx.Node, results: list) -> bool:
    """Whether `results` (the graph's outputs) are exactly the region's outputs, in order."""
    if not call.target.returns_tuple:
        return results == [call]
    # The partitioner gives a region an output only for a value used outside it, through a
    # getitem: outputs 0..k-1 in order are all of them.
    return len(results) == len(call.users) and all(
        isinstance(r, torch.fx.Node) and r.op == "call_function" and r.target is operator.getitem
        and r.args == (call, i) for i, r in enumerate(results))


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
    results = next(n for n in nodes if n.op == "output").args[0]
    if not isinstance(results, (tuple, list)) or not _region_outputs(call, list(results)):
        return None
    inner = [n for n in nodes if n.op not in ("placeholder", "output")]
    if len(inner) != 1 + (len(results) if region_call.returns_tuple else 0):
        return None  # something else runs in the graph too
    region = region_call.region
    # The partitioner orders a region's inputs by first use, not as the graph takes them.
    order = [placeholders.index(a) for a in call.args]
    pick = None if order == list(range(len(placeholders))) else operator.itemgetter(*order)
    if len(order) == 1 and pick is not None:
        pick = lambda inputs, i=order[0]: (inputs[i],)  # noqa: E731 (itemgetter of one: no tuple)

    def run(inputs: list) -> list:
        tensors = inputs if pick is None else pick(inputs)
        if torch._C._len_torch_dispatch_stack():  # as RegionCall._run: kiln runs beneath modes
            with _disable_current_modes():
                return region.run(tensors)
        return region.run(tensors)

    run._boxed_call = True  # AOTAutograd's calling convention: one list of inputs
    return run


def plain_forward(gm: torch.fx.GraphModule):
    """`gm`'s generated forward, without nn.Module's call machinery (about 1.2 us a call): the
    module has no hooks. A lazily recompiled module's forward first calls the module itself."""
    _LazyGraphModule.force_recompile(gm)
    return gm.forward
