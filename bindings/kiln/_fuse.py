"""Regions cut out of an FX graph: each partition of nodes becomes a submodule called in its
place, as torch's ``CapabilityBasedPartitioner.fuse_partitions`` does, with one difference: the
submodule is a lazy GraphModule, whose Python code is generated only if something calls it. kiln
reads a region's graph, and calls its module only when the region falls back to eager PyTorch;
generating that code for every region cost more than the rest of kiln's partitioning (ResNet-50's
one region: ~35 ms of ~80)."""

from __future__ import annotations

import operator

import torch
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.passes.tools_common import stable_topological_sort


def fuse_partitions(gm: torch.fx.GraphModule, partitions, prefix: str) -> torch.fx.GraphModule:
    """``gm`` (changed in place) with the nodes of each partition (convex sets of call nodes, as
    the partitioner proposes them) replaced by a ``call_module`` of a submodule named
    ``prefix + index``, whose inputs are the values the partition reads from outside it, in the
    order of first use, and whose output is the one value read outside it, or a tuple of them
    (then taken apart by getitem nodes)."""
    for index, partition in enumerate(partitions):
        inside = partition.nodes
        nodes = [n for n in gm.graph.nodes if n in inside]  # a graph's order is topological
        sub = torch.fx.Graph()
        copies: dict[torch.fx.Node, torch.fx.Node] = {}
        inputs: dict[torch.fx.Node, torch.fx.Node] = {}

        def copy_of(value: torch.fx.Node) -> torch.fx.Node:
            if value in inside:
                return copies[value]
            if value not in inputs:
                inputs[value] = sub.placeholder(value.name, type_expr=value.type)
                inputs[value].meta = dict(value.meta)
            return inputs[value]

        for node in nodes:
            copies[node] = sub.node_copy(node, copy_of)
        outputs = [n for n in nodes if any(user not in inside for user in n.users)]
        sub.output(copies[outputs[0]] if len(outputs) == 1
                   else tuple(copies[n] for n in outputs))
        name = f"{prefix}{index}"
        gm.add_submodule(name, _LazyGraphModule(gm, sub, name))
        with gm.graph.inserting_after(outputs[-1]):
            call = gm.graph.call_module(name, tuple(inputs))
        if len(outputs) == 1:
            outputs[0].replace_all_uses_with(call, propagate_meta=True)
        else:
            with gm.graph.inserting_after(call):
                for i, output in reversed(list(enumerate(outputs))):
                    output.replace_all_uses_with(gm.graph.call_function(
                        operator.getitem, (call, i)), propagate_meta=True)
            call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
        for node in reversed(nodes):
            gm.graph.erase_node(node)
    # A value read outside a partition may be read before the partition's last node, where the
    # call now stands: order the graph again.
    stable_topological_sort(gm)
    return gm
