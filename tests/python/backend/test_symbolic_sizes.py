"""torch.compile graphs with symbolic sizes (dynamo's automatic dynamic shapes, after the first
shape change): ops taking sizes as graph values compile inside regions, as expressions of the
regions' tensor sizes; results match eager at every shape."""

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln import _fx
from models import assert_close


def compile_kiln(model, **kwargs):
    return torch.compile(model, backend="kiln", **kwargs)


def _symbolic_stats(compiled, reference, shapes, *extra):
    """Stats of the graph dynamo compiles with symbolic sizes (after the first shape changes)."""
    with torch.no_grad():
        x = torch.randn(*shapes[0])
        assert_close(compiled(x, *extra), reference(x, *extra))
        kiln.reset_stats()
        for shape in shapes[1:]:
            x = torch.randn(*shape)
            actual, expected = compiled(x, *extra), reference(x, *extra)
            assert actual.shape == expected.shape
            assert_close(actual, expected)
    return kiln.stats()


def test_linears_on_symbolic_sizes_compile_in_one_region():
    """A linear on a 3-D input comes as view/addmm/view with the sizes as graph values, which
    kiln folds back into `linear`, so nothing runs eagerly."""
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32),
                                torch.nn.LayerNorm(32)).eval()
    stats = _symbolic_stats(compile_kiln(model), model, [(2, 10, 32), (3, 7, 32), (4, 5, 32)])
    assert stats["graphs"] == 1 and stats["regions"] == 1 and stats["eager_ops"] == 0, stats
    # One compile (a shape class, its sizes declared by the graph) serves both shapes.
    assert stats["kernels"] >= 1 and stats["specializations"] == 1, stats
    assert stats["shape_classes"] == 1 and stats["class_plans"] == 1, stats


class _Conv1D(torch.nn.Module):
    """GPT-2's linear: the weight stored as [in, out], applied with addmm on a flattened view."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(32, 48) * 0.1)
        self.bias = torch.nn.Parameter(torch.randn(48))

    def forward(self, x):
        y = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return y.view(x.size()[:-1] + (48,)).relu()


def test_an_untransposed_weight_folds_too():
    model = _Conv1D().eval()
    stats = _symbolic_stats(compile_kiln(model), model, [(2, 10, 32), (3, 7, 32), (4, 5, 32)])
    assert stats["regions"] == 1 and stats["eager_ops"] == 0, stats


def test_a_reshape_to_a_symbolic_size_compiles_inside_the_region():
    def f(x):
        return (x.relu().reshape(x.shape[0], -1) * 2).sigmoid()

    stats = _symbolic_stats(compile_kiln(f), f, [(2, 3, 4), (5, 3, 4), (7, 3, 4)])
    assert stats["graphs"] == 1 and stats["regions"] == 1 and stats["eager_ops"] == 0, stats
    assert stats["fallbacks"] == 0, stats


class _Attention(torch.nn.Module):
    """Self-attention written out as BERT does: head views and a permute on symbolic sizes,
    positions from arange over the sequence length, an expanded mask, a flattening reshape."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.positions = torch.nn.Embedding(64, width)
        self.out = torch.nn.Linear(width, width)

    def forward(self, x):
        batch, length, width = x.shape
        x = x + self.positions(torch.arange(length))
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5
        mask = torch.ones(length, length).tril().expand(batch, 1, length, length)
        scores = scores.masked_fill(mask == 0, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, length, width)
        return self.out(y)


def test_attention_on_symbolic_sizes_is_one_region():
    model = _Attention().eval()
    stats = _symbolic_stats(compile_kiln(model), model, [(2, 10, 32), (3, 7, 32), (4, 13, 32)])
    assert stats["graphs"] == 1 and stats["regions"] == 1 and stats["eager_ops"] == 0, stats


def test_training_on_symbolic_sizes_matches_eager_gradients():
    torch.manual_seed(0)
    model, reference = _Attention().train(), _Attention().train()
    reference.load_state_dict(model.state_dict())
    compiled = compile_kiln(model)
    for i, shape in enumerate([(2, 10, 32), (3, 7, 32), (4, 13, 32)]):
        if i == 1:
            kiln.reset_stats()  # from here on, the graphs have symbolic sizes
        x = torch.randn(*shape)
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_close(p.grad, q.grad)
            p.grad, q.grad = None, None
    stats = kiln.stats()
    assert stats["graphs"] == 2 and stats["regions"] == 2 and stats["eager_ops"] == 0, stats


def test_a_region_takes_the_input_that_carries_its_sizes():
    """The region here reads only `w`; the slice's end is x's length, and x is no input of it.
    kiln compiles a region per signature of its tensor inputs, so it passes `x` in as well: with
    `w` alone, every length would find the plan compiled for the first. (dynamo's graphs put such
    ops in one region with `x` whenever they can; a graph traced with symbolic sizes shows it.)"""
    def f(x, w):
        return (w[: x.shape[0]] * 2).relu()

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(3), torch.randn(64))
    kiln.reset_stats()
    gm = _fx.compile_graph(gm, {}, "sliced")
    calls = [n for n in gm.graph.nodes if isinstance(n.target, _fx.RegionCall)]
    assert len(calls) == 1 and kiln.stats()["eager_ops"] == 0
    tensor_inputs = [a.name for a in calls[0].args if isinstance(a.meta["val"], torch.Tensor)]
    assert tensor_inputs == ["w_1", "x_1"]
    w = torch.randn(64)
    for length in (3, 5, 9, 5):
        assert_close(gm(torch.randn(length), w), f(torch.randn(length), w))
    # x's length is the graph's symbol: 3 compiles a shape class (one compile for every length),
    # 5 and 9 are plans made from it.
    stats = kiln.stats()
    assert stats["specializations"] == 1 and stats["shape_classes"] == 1, stats
    assert stats["class_plans"] == 2, stats
    region = calls[0].target
    assert region.sizes and region.call_inputs.value is None  # no input kept past the call


def test_a_size_read_off_a_computed_value_does_not_split_the_region():
    """Window attention reads the window count off the windows (`w.shape[0]`): the size node
    takes its value from inside the region, and the view that uses it would have to follow the
    region. kiln recomputes such sizes from the graph's inputs (_rebase_sizes.py)."""
    def f(x):
        c = x.shape[3]
        w = x.view(x.shape[0], 2, 4, 2, 4, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, c)
        w = w.softmax(-1)
        return (w.view(w.shape[0] // 4, 4, 16, -1) * 2).sum(1)

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(3, 8, 8, 5))
    assert any(n.target is torch.ops.aten.sym_size.int and n.args[0].op != "placeholder"
               for n in gm.graph.nodes)  # the case: a size read off a computed value
    kiln.reset_stats()
    gm = _fx.compile_graph(gm, {}, "windows")
    assert kiln.stats()["regions"] == 1 and kiln.stats()["eager_ops"] == 0, kiln.stats()
    for batch in (2, 3, 5):
        x = torch.randn(batch, 8, 8, 5)
        assert_close(gm(x), f(x))


def test_a_size_only_an_int_input_carries_compiles_too():
    """`n` is a symbolic int input, no tensor's size: the region takes a one-element tensor
    expanded to [n] (_sizes.size_carrier), so n is part of its signature like any size."""
    def f(x, n):
        return (x.relu().repeat(n, 1) * 2).sigmoid()

    compiled = compile_kiln(f)
    x = torch.randn(3, 4)
    with torch.no_grad():
        assert_close(compiled(x, 2), f(x, 2))
        kiln.reset_stats()
        for n in (3, 5, 3, 7):
            assert_close(compiled(x, n), f(x, n))
    stats = kiln.stats()
    assert stats["regions"] == 1 and stats["eager_ops"] == 0, stats
    # n is the graph's symbol, and the carrier's size: 3 compiles a shape class (the carrier,
    # expanded, moves with n); 5 and 7 are plans made from it.
    assert stats["specializations"] == 1 and stats["fallbacks"] == 0, stats
    assert stats["shape_classes"] == 1 and stats["class_plans"] == 2, stats
    # The carriers handed to regions are real tensors (none kept from tracing's fake mode).
    from kiln import _sizes
    assert all(type(t) is torch.Tensor for t in _sizes._CARRIED.values())


def test_past_max_specializations_a_region_with_sizes_runs_eagerly():
    """The eager fallback of a region that reads symbolic sizes gets them back."""
    def f(x):
        return (x.relu().reshape(x.shape[0], -1) * 2).sigmoid()

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(2, 3, 4))
    kiln.reset_stats()
    gm = _fx.compile_graph(gm, {"max_specializations": "1"}, "limited")
    # The first batch compiles the class (the one specialization allowed); float64 inputs are
    # not its members, and past the limit they run eagerly.
    for x in (torch.randn(5, 3, 4), torch.randn(7, 3, 4), torch.randn(9, 3, 4).double(),
              torch.randn(4, 3, 4).double()):
        assert_close(gm(x), f(x))
    stats = kiln.stats()
    assert stats["regions"] == 1 and stats["fallbacks"] >= 1, stats
    assert stats["shape_classes"] == 1 and stats["class_plans"] == 1, stats


def test_a_symbolic_int_used_as_a_tensor_operand_compiles_too():
    """`positions + offset` with a symbolic int `offset` (how transformers computes cache
    positions) is `aten.add.Tensor(t, s)`: kiln takes it as the Scalar overload, the size written
    as an expression of the region's sizes; a number first (`offset - positions`) likewise."""
    def f(x, offset):
        positions = torch.arange(x.shape[1]) + offset
        return x * (positions * 2).float() - (offset - positions).float()

    compiled = compile_kiln(f)
    with torch.no_grad():
        x = torch.randn(2, 5)
        assert_close(compiled(x, 3), f(x, 3))  # static sizes; the next call makes them symbolic
        kiln.reset_stats()
        for length, offset in ((6, 4), (7, 9), (6, 4)):
            x = torch.randn(2, length)
            assert_close(compiled(x, offset), f(x, offset))
    stats = kiln.stats()
    assert stats["regions"] == 1 and stats["eager_ops"] == 0, stats
    assert stats["fallbacks"] == 0, stats


def test_declared_sizes_of_a_region_name_symbols_derived_sizes_and_strides():
    """kiln/_sizes.py's symbolic_dims on fake inputs: a plain symbol per dim, a flattened dim as
    a program of its symbols, the strides of a slice, and a flattened dim of symbols no input has
    (a frame's own labels after a graph break) as the located product of the same value."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from kiln import _sizes

    mode = FakeTensorMode(shape_env=ShapeEnv())
    tokens = mode.from_tensor(torch.empty(4, 55, 12))  # [s0, s1, 12]
    labels = mode.from_tensor(torch.empty(5, 44))  # [s2, s3]: 220 elements, as 4 x 55
    with mode:
        values = [tokens, tokens.reshape(-1, 12), tokens[..., :4], labels.reshape(-1)]
    graph = torch.fx.Graph()
    nodes = []
    for i, value in enumerate(values):
        nodes.append(graph.placeholder(f"x{i}"))
        nodes[-1].meta["val"] = value
    dims, derived, strides = _sizes.symbolic_dims(nodes)
    assert dims == [[0, 1, -1], [-2, -1], [0, 1, -1], [-2]]
    product = [("dim", 0, 0), ("dim", 1, 0), ("mul", 0, 0)]
    assert derived == [(1, 0, product), (3, 0, product)]
    (slice_input, slice_strides), = [s for s in strides if s[0] == 2]
    assert slice_strides == [[("const", 12, 0), ("dim", 1, 0), ("mul", 0, 0)],
                             [("const", 12, 0)], [("const", 1, 0)]]
    # Two located products of that value: which one the labels follow is not known, so none.
    other = mode.from_tensor(torch.empty(10, 22))  # [s4, s5]
    with mode:
        extra = [other, other.reshape(-1)]
    for i, value in enumerate(extra):
        nodes.append(graph.placeholder(f"y{i}"))
        nodes[-1].meta["val"] = value
    assert _sizes.symbolic_dims(nodes) == ([], [], [])
