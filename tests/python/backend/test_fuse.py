"""kiln's fuse_partitions (_fuse.py): a partition becomes one call of a lazy submodule, with the
graph ordered again where a value the partition makes is read before the partition ends."""

import torch
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.passes.infra.partitioner import Partition

from kiln._fuse import fuse_partitions


def _f(x):
    a = x.sin()
    b = a.cos()  # outside the partition, between its nodes
    c = a.exp()
    return b + c, c * 2


def test_a_partition_becomes_one_call_and_computes_the_same():
    gm = torch.fx.symbolic_trace(_f)
    by_name = {n.name: n for n in gm.graph.nodes}
    fused = fuse_partitions(gm, [Partition(nodes=[by_name["sin"], by_name["exp"]])], "region_")
    fused.graph.lint()  # every value defined before its reads
    fused.recompile()
    region = fused.region_0
    assert isinstance(region, _LazyGraphModule)
    assert [n.op for n in region.graph.nodes].count("placeholder") == 1
    assert len(region.graph.output_node().args[0]) == 2  # sin's value and exp's, both read outside
    calls = [n.target for n in fused.graph.nodes if n.op == "call_module"]
    assert calls == ["region_0"]
    x = torch.randn(5)
    for got, expected in zip(fused(x), _f(x)):
        torch.testing.assert_close(got, expected)
