"""The ops kiln keeps whole (kiln/_decompositions.py) reach it as one ATen op and match eager."""

import collections

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln import _decompositions, _fx
from models import assert_close


class PadUnfoldRoll(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)

    def forward(self, x):
        y = self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect"))
        y = F.pad(y, (2, 0, 1, 1), mode="replicate").roll(3, dims=2) * 2
        return F.unfold(y.tanh(), 3, padding=1).sum(1)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d).relu()


class IndexAddFill(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        rows = torch.arange(x.shape[0]) % 5
        summed = torch.zeros(5, 8).index_add(0, rows, self.linear(x).sin())
        return summed.index_fill(1, torch.tensor([1, 6]), -1.0).exp()


KEPT = {
    PadUnfoldRoll: ("aten.reflection_pad2d", "aten.replication_pad2d", "aten.roll",
                    "aten.im2col"),
    Attention: ("aten._scaled_dot_product_flash_attention_for_cpu",),
    IndexAddFill: ("aten.index_add", "aten.index_fill"),
}
# What the backward graph calls instead of a decomposition of the kept ops' backward.
KEPT_BACKWARD = {
    PadUnfoldRoll: ("aten.reflection_pad2d_backward", "aten.col2im"),
    Attention: ("aten._scaled_dot_product_flash_attention_for_cpu_backward",),
    IndexAddFill: ("aten.index_fill",),
}
SHAPES = {PadUnfoldRoll: (2, 4, 9, 11), Attention: (2, 7, 16), IndexAddFill: (23, 8)}
MODELS = list(KEPT)


@pytest.fixture
def graph_ops(monkeypatch):
    """The call_function targets of every graph kiln's backend is handed, in order."""
    seen = []
    compile_graph = _fx.compile_graph

    def spy(gm, *args, **kwargs):
        seen.append(collections.Counter(str(n.target).rsplit(".", 1)[0]
                                        for n in gm.graph.nodes if n.op == "call_function"))
        return compile_graph(gm, *args, **kwargs)

    monkeypatch.setattr(_fx, "compile_graph", spy)
    return seen


def test_the_table_is_core_aten_less_the_kept_ops():
    from torch._decomp import core_aten_decompositions

    table = _decompositions.decomposition_table()
    core = core_aten_decompositions()
    dropped = {op for op in core if op not in table}
    assert dropped, "core ATen's table no longer decomposes any kept op"
    assert {op.overloadpacket for op in dropped} <= _decompositions.KEPT_WHOLE
    assert torch.ops.aten.reflection_pad2d.default in dropped
    assert torch.ops.aten.reflection_pad2d_backward.default in dropped


@pytest.mark.parametrize("make_model", MODELS)
def test_inference_keeps_the_op_and_matches_eager(make_model, graph_ops):
    model = make_model().eval()
    x = torch.randn(SHAPES[make_model])
    kiln.reset_stats()
    with torch.no_grad():
        out = torch.compile(model, backend="kiln")(x)
        expected = model(x)
    assert_close(out, expected)
    (ops,) = graph_ops
    for name in KEPT[make_model]:
        assert ops[name] >= 1, (name, ops)
    assert ops["aten.index"] == 0 and ops["aten.index_put"] == 0, ops  # pads, im2col, roll, ...
    assert ops["aten.bmm"] == 0, ops  # what the fused attention decomposes into
    assert kiln.stats()["graph_fallbacks"] == 0


@pytest.mark.parametrize("make_model", MODELS)
def test_training_keeps_the_op_and_gradients_match_eager(make_model, graph_ops):
    model, reference = make_model(), make_model()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(SHAPES[make_model], requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    kiln.reset_stats()
    loss = torch.compile(model, backend="kiln")(x).square().mean()
    loss.backward()
    expected = reference(x_ref).square().mean()
    expected.backward()
    assert_close(loss, expected)
    assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-3)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-3), name
    forward, backward = graph_ops
    for name in KEPT[make_model]:
        assert forward[name] >= 1, (name, forward)
    for name in KEPT_BACKWARD[make_model]:
        assert backward[name] >= 1, (name, backward)
    assert kiln.stats()["graph_fallbacks"] == 0


INTERPOLATIONS = [
    ((2, 3, 9, 11), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 9, 11), dict(size=(13, 20), mode="nearest-exact")),
    ((2, 3, 9, 11), dict(scale_factor=(1.5, 2.25), mode="bilinear")),
    ((2, 3, 9, 11), dict(size=17, mode="bilinear", align_corners=True)),
    ((2, 3, 9, 11), dict(scale_factor=3, mode="bicubic", antialias=False)),
    ((2, 3, 9, 11), dict(size=(5, 4), mode="bilinear", antialias=True)),
    ((2, 3, 10), dict(scale_factor=2.5, mode="linear")),
    ((1, 2, 4, 5, 6), dict(scale_factor=2, mode="trilinear")),
]


@pytest.mark.parametrize("shape,kwargs,channels_last",
                         [(s, k, False) for s, k in INTERPOLATIONS]
                         + [(s, k, True) for s, k in INTERPOLATIONS if len(s) == 4])
def test_inference_interpolate_runs_atens_kernel(shape, kwargs, channels_last, graph_ops):
    def f(x):
        return F.interpolate(x.relu(), **kwargs) * 2

    x = torch.randn(shape)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    kiln.reset_stats()
    with torch.no_grad():
        out = torch.compile(f, backend="kiln")(x)
    expected = f(x)
    assert torch.equal(out, expected)  # the same ATen kernel, and an exact * 2
    assert out.stride() == expected.stride()
    (ops,) = graph_ops
    assert ops["kiln.interpolate"] == 1 and ops["aten.index"] == 0, ops
    assert kiln.stats()["eager_ops"] == 0 and kiln.stats()["fallbacks"] == 0


def test_training_interpolate_is_decomposed_and_gradients_match_eager(graph_ops):
    def f(x):
        return F.interpolate(x, scale_factor=2, mode="bilinear").sin()

    x = torch.randn(2, 3, 6, 7, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    torch.compile(f, backend="kiln")(x).sum().backward()
    f(x_ref).sum().backward()
    assert_close(x.grad, x_ref.grad)
    assert graph_ops[0]["kiln.interpolate"] == 0, graph_ops[0]


def test_area_and_graph_computed_sizes_are_left_to_the_decomposition():
    from kiln._decompositions import keep_interpolate_whole

    def f(x, y):
        return F.interpolate(x, size=y.shape[-1] * 2), F.interpolate(x, size=3, mode="area")

    seen = []

    def backend(gm, example_inputs):
        seen.append(keep_interpolate_whole(gm))
        return gm

    x, y = torch.randn(1, 2, 5), torch.randn(4)
    torch.compile(f, backend=backend, dynamic=True)(x, y)
    assert seen == [0]


def test_each_graph_gets_its_own_copy_of_the_table():
    first = _decompositions.decomposition_table(True, True)
    size = len(first)
    first.clear()  # what a caller does with its table stays with it
    again = _decompositions.decomposition_table(True, True)
    assert len(again) == size and again is not first
    # A training graph's table decomposes what an inference graph keeps whole: a table of its own.
    assert len(_decompositions.decomposition_table(True, False)) >= size
