"""kiln's partitioned graph written and read back (kiln/_partition_cache.py): the graph read
back runs as the one written, ops kiln leaves to eager PyTorch included, and each region's eager
fallback (read only when it runs) computes what the region's FX module computed."""

import operator

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln import _fx, _partition_cache


def _mixed(x):  # two regions with eager ops between them (complex values stay out of regions)
    a = torch.relu(x)
    z = torch.view_as_complex(a.view(16, 2))
    c = torch.view_as_real(z * z).view(32)
    return torch.cat([c.exp(), a * 2]).sum(0, keepdim=True) + a.sigmoid(), a.tanh()


def _regions(gm):
    return [n.target for n in gm.graph.nodes if isinstance(n.target, _fx.RegionCall)]


def test_a_partitioned_graph_read_back_runs_as_the_one_written():
    x = torch.randn(32)
    kiln.reset_stats()
    compiled = _fx.compile_graph(make_fx(_mixed)(x), {}, "written")
    counted = {k: kiln.stats()[k] for k in ("regions", "eager_ops")}
    data = _partition_cache.write(compiled)
    assert data is not None
    kiln.reset_stats()
    read = _partition_cache.read(data, {}, "read")
    # Reading counts what compiling counted.
    assert {k: kiln.stats()[k] for k in counted} == counted and counted["eager_ops"] > 0
    written_regions, read_regions = _regions(compiled), _regions(read)
    assert len(read_regions) == len(written_regions) >= 2
    eager_ops = [n for n in read.graph.nodes if n.op == "call_function"
                 and not isinstance(n.target, _fx.RegionCall) and n.target is not operator.getitem]
    assert eager_ops, "the eager ops between the regions are in the graph read back"
    for got, want, expected in zip(read(x), compiled(x), _mixed(x)):
        assert torch.equal(got, want)
        torch.testing.assert_close(got, expected)
    # The fallbacks: each read region's module against the written one, on random inputs.
    for written, region in zip(written_regions, read_regions):
        module = written.source.module
        inputs = [torch.randn(n.meta["val"].shape, dtype=n.meta["val"].dtype)
                  for n in module.graph.nodes if n.op == "placeholder"]
        for got, want in zip(*(torch.utils._pytree.tree_leaves(m(*inputs))
                               for m in (region.source.module, module))):
            assert torch.equal(got, want)


def test_a_graph_with_a_region_left_to_eager_is_not_written():
    x = torch.randn(32)
    compiled = _fx.compile_graph(make_fx(_mixed)(x), {}, "written")
    call = next(n for n in compiled.graph.nodes if isinstance(n.target, _fx.RegionCall))
    call.target.source = None  # as a region kiln could not build, whose module stays
    assert _partition_cache.write(compiled) is None
