"""Shape classes: a region whose new input signature differs from one it compiled only in some
dims compiles once for every size of those dims, and each later size gets a plan made from that
compile (no pass, no code generation). Results match eager at every size; sizes 0 and 1, other
dtypes and layouts are not members and compile on their own, as before."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import kiln
from kiln import _fx
from models import assert_close


class _Encoder(torch.nn.Module):
    """Attention over the tokens, a layer norm and a GELU MLP: softmax rows, scores of
    [tokens, tokens] and layer-norm rows whose sizes all follow the token count."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.up(self.norm(x)))
        scores = torch.softmax(h @ h.transpose(-1, -2) * 0.125, dim=-1)
        return x + self.down(scores @ h)


def _stream(compiled, model, shapes):
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(*shape)
            assert_close(compiled(x), model(x))


def test_a_stream_of_token_counts_compiles_one_class_and_matches_eager():
    torch.manual_seed(0)
    model = _Encoder().eval()
    compiled = torch.compile(model, backend="kiln")
    lengths = [5, 7, 9, 12, 31, 64, 2, 100, 9, 12]
    kiln.reset_stats()
    _stream(compiled, model, [(2, n, 32) for n in lengths])
    stats = kiln.stats()
    # dynamo's first graph has static sizes (5); its symbolic one declares the token count
    # symbolic, so the first length it sees (7) compiles the class; five other lengths are its
    # plans. Length 2 is not a member: its linears have 4 rows, which kiln computes in kernels of
    # its own (a size decision the class keeps as a guard). A class for it cannot be fitted (at
    # lengths 2, 3 and 4 the rows are 4, 6 and 8: the decision turns), so the class it has serves
    # it, with the GEMMs it chose: one more plan, no compile.
    assert stats["shape_classes"] == 1 and stats["fallbacks"] == 0, stats
    assert stats["specializations"] == 2 and stats["class_plans"] == 6, stats
    assert stats["eager_ops"] == 0, stats


def test_sizes_outside_the_class_compile_on_their_own():
    """make_fx's symbolic graph, called directly: the region sees every signature itself."""
    def f(x, w):
        return torch.softmax(x @ w, dim=-1) * x.sum(-1, keepdim=True)

    w = torch.randn(16, 16)
    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(3, 16), w)
    kiln.reset_stats()
    gm = _fx.compile_graph(gm, {}, "classes")
    with torch.no_grad():
        for rows in (3, 5, 8, 13):
            x = torch.randn(rows, 16)
            assert_close(gm(x, w), f(x, w))
        # The graph's rows are symbolic: 3 compiles the class, 5, 8 and 13 are its plans.
        assert kiln.stats()["shape_classes"] == 1 and kiln.stats()["class_plans"] == 3
        # Not members: one row (broadcasts otherwise), a transposed layout, another dtype.
        for x in (torch.randn(1, 16), torch.randn(16, 6).t(), torch.randn(7, 16).double()):
            assert_close(gm(x, w.to(x.dtype)), f(x, w.to(x.dtype)))
    stats = kiln.stats()
    assert stats["class_plans"] == 3 and stats["fallbacks"] == 0, stats
    assert stats["specializations"] == 1 + 3, stats


def test_a_batch_stream_of_a_small_cnn_shares_one_class():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=4), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()
    compiled = torch.compile(model, backend="kiln")
    kiln.reset_stats()
    _stream(compiled, model, [(b, 3, 20, 20) for b in (6, 8, 10, 7, 12, 9, 6)])
    stats = kiln.stats()
    # 6: dynamo's static graph; 8: the symbolic graph's first signature, compiled as the class;
    # 10, 7, 12 and 9 (and 6 again, where dynamo hands it to the symbolic graph): its plans.
    assert stats["shape_classes"] == 1 and stats["fallbacks"] == 0, stats
    assert stats["specializations"] == 2 and stats["class_plans"] >= 4, stats


def test_a_batch_equal_to_a_stride_or_padding_still_forms_the_class():
    """A convolution of stride 2 and padding 3 at batches 2 and 3: its packed weight has those
    integers in its attributes, equal to the batch by chance, and is still folded into a constant
    at every binding (it is not shaped by the batch), so the class forms at the first batch."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, stride=2, padding=3), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU()).eval()
    compiled = torch.compile(model, backend="kiln")
    kiln.reset_stats()
    with torch.no_grad():
        for batch in (2, 3, 5, 2, 4):
            x = torch.randn(batch, 3, 24, 24)
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(compiled(x), model(x))
    stats = kiln.stats()
    assert stats["shape_classes"] == 1 and stats["specializations"] == 1, stats
    assert stats["class_plans"] == 3 and stats["fallbacks"] == 0, stats


@pytest.mark.parametrize("rows", [(16, 2, 250000, 3, 200000, 40), (250000, 2, 40, 3, 16, 7)])
def test_past_two_classes_over_the_same_dims_the_nearest_class_serves_the_sizes(rows):
    """Three outcomes of the size decisions over the rows: up to 4 (a kernel of kiln's own for
    the linear), more (a prepacked GEMM), and so many that the kernel after it would choose
    streaming stores. Two classes compile; past them, rows of the third outcome run the plan of
    the class whose guards they fail fewest (each guard picks a speed, not a result): code
    without streaming stores at 250000 rows, or with them at 40, 16 and 7."""
    class _Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(64, 64)

        def forward(self, x):
            y = torch.tanh(self.linear(x))
            return y * 2 + y.sum(-1, keepdim=True)

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _Model().eval()
    compiled = torch.compile(model, backend="kiln", dynamic=True)
    kiln.reset_stats()
    _stream(compiled, model, [(n, 64) for n in rows])
    stats = kiln.stats()
    assert stats["shape_classes"] == 2 and stats["specializations"] == 2, stats
    assert stats["class_plans"] == 4 and stats["fallbacks"] == 0, stats


def test_a_random_signature_stream_matches_eager_at_every_call():
    """Sizes (0 and 1 among them), ranks, dtypes and layouts drawn at random: dynamo guards on
    rank, dtype and layout and recompiles; kiln forms classes where only sizes move, and compiles
    the rest on their own. Every call must match eager, with nothing falling back."""
    import random

    def f(x):
        scores = torch.softmax(x @ x.transpose(-1, -2) * 0.1, dim=-1)
        return torch.nn.functional.gelu(scores @ x) - x.mean(-1, keepdim=True)

    rng = random.Random(0)
    compiled = torch.compile(f, backend="kiln")
    kiln.reset_stats()
    with torch._dynamo.config.patch(recompile_limit=64), torch.no_grad():
        for _ in range(40):
            rank, dtype = rng.choice([2, 3]), rng.choice([torch.float32, torch.float64])
            shape = [rng.choice([0, 1, 2, 3, 5, 8, 13, 17]) for _ in range(rank - 1)] + [16]
            x = torch.randn(*shape, dtype=dtype)
            if rank == 2 and rng.random() < 0.3:  # transposed storage: another layout
                x = torch.randn(16, shape[0], dtype=dtype).t()
            assert_close(compiled(x), f(x))
    stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["graph_fallbacks"] == 0, stats
    assert stats["shape_classes"] >= 2 and stats["class_plans"] >= 5, stats


def test_a_size_decision_is_a_guard_and_sizes_past_it_get_a_class_of_their_own():
    """A linear of up to 4 rows runs in a kernel of kiln's own, of more through a prepacked
    GEMM: a size decision of the passes. The class compiled at 16 rows keeps it as a guard, so
    2 rows are no member of it: they compile a second class, whose plans serve 3 rows too."""
    torch.manual_seed(0)
    torch._dynamo.reset()  # the stream alone: one graph, its sizes symbolic from the start
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 64)).eval()
    compiled = torch.compile(model, backend="kiln", dynamic=True)
    kiln.reset_stats()
    _stream(compiled, model, [(rows, 64) for rows in (16, 32, 2, 3, 300)])
    stats = kiln.stats()
    assert stats["shape_classes"] == 2 and stats["specializations"] == 2, stats
    assert stats["class_plans"] == 3 and stats["fallbacks"] == 0, stats


class _Pool4(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 4) * 2 + 1


@pytest.mark.parametrize("entry", ["torch.compile", "torchscript"])
def test_a_size_floored_by_a_stride_of_four_is_never_given_another_sizes_plan(entry):
    """max_pool2d(x, 4) over heights 57 to 81: the pooled height h // 4 takes one value at three
    heights in a row (14 at 57, 58 and 59), so a fit made at bindings one apart can take it for a
    constant. Each new height's import is checked against the class's: a height whose pooled
    height the class would get wrong is no member and compiles on its own. Every output has
    eager's shape and values."""
    torch._dynamo.reset()
    model = _Pool4().eval()
    heights = [57, 58, 61, 62, 65, 66, 69, 73, 77]
    compiled = (torch.compile(model, backend="kiln") if entry == "torch.compile" else
                kiln.compile(torch.jit.trace(model, (torch.randn(2, 4, 57, 20),))))
    kiln.reset_stats()
    _stream(compiled, model, [(2, 4, h, 20) for h in heights])
    assert kiln.stats()["shape_classes"] >= 1, kiln.stats()  # the path was taken


def test_greedy_generation_with_a_kv_cache_compiles_its_step_once():
    """transformers' GPT-2 generating with its default KV cache: each step's past length is a new
    size. The step's causal mask is [1, P + 1] and compares positions with `arange(1) + P`; both
    move with the past length P without being a size input, so a class folds neither (folded,
    they would be constants that differ between the bindings, and no class). The step compiles
    once as a class; every later length is a plan of it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    torch._dynamo.reset()
    config = GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=100, n_positions=64,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(1, 100, (2, 5))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False)
        model.forward = torch.compile(model.forward, backend="kiln")
        kiln.reset_stats()
        tokens = model.generate(ids, attention_mask=mask, max_new_tokens=12, do_sample=False)
    assert torch.equal(tokens, expected)
    stats = kiln.stats()
    assert stats["shape_classes"] >= 1 and stats["fallbacks"] == 0, stats
    assert stats["specializations"] <= 4 and stats["class_plans"] >= 8, stats


def _image_model(cls, entry: str, side: int):
    """A fresh `cls` in eval, and it compiled through `entry` (traced at a square image of
    `side`), with kiln's stats reset."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = cls().eval()
    compiled = (torch.compile(model, backend="kiln") if entry == "torch.compile" else
                kiln.compile(torch.jit.trace(model, (torch.randn(1, 3, side, side),))))
    kiln.reset_stats()
    return model, compiled


class _Strided(torch.nn.Module):
    """Two stride-2 convolutions and a max pool: every size after them is the image's over 8,
    floored, and a polynomial of the image's height only over heights 8 apart."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(32, 32, 1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.body(x))
        return self.head(y.mean((2, 3))), y * 2


@pytest.mark.parametrize("entry", ["torch.compile", "torchscript"])
def test_image_sizes_through_strided_convolutions_share_a_class_in_steps_of_their_strides(entry):
    """Square images of sides 40 to 120, multiples of 8: the class's size input counts eights
    (choose_steps), so one compile serves them all, with no fallback past max_specializations
    (under torch.compile one per symbolic graph: dynamo recompiles at sizes its fake convolution
    guards on). Sides off the step (36, 44, 52, 60: four past a multiple of 8) are no members:
    they form one more class (in steps of 8 from 4: their sizes past the strides are shifted
    factors). In a region with classes already, the first compiles on its own (an offset seen
    once is not worth a class) and the second forms it; in a graph dynamo makes for them, the
    first forms it. The others are its plans. Every output is eager's."""
    model, compiled = _image_model(_Strided, entry, side=32)
    sides = [32, 40, 48, 56, 64, 72, 80, 96, 104, 120, 48]
    with torch.no_grad():
        for side in sides:
            x = torch.randn(1, 3, side, side)
            for got, want in zip(compiled(x), model(x)):
                assert_close(got, want)
        stats = kiln.stats()
        # dynamo's graphs: the first static, each later one symbolic; the module's compiles.
        graphs = stats["graphs"] - 1 if entry == "torch.compile" else 1
        assert stats["shape_classes"] == graphs and stats["fallbacks"] == 0, stats
        assert stats["specializations"] <= graphs + 2 and stats["class_plans"] >= 6, stats
        for side in (36, 44, 52, 60):
            x = torch.randn(1, 3, side, side)
            for got, want in zip(compiled(x), model(x)):
                assert_close(got, want)
    after = kiln.stats()
    assert after["shape_classes"] == stats["shape_classes"] + 1 and after["fallbacks"] == 0, after
    new_graph = after["graphs"] > stats["graphs"]
    assert after["specializations"] <= stats["specializations"] + (1 if new_graph else 2), after
    assert after["class_plans"] == stats["class_plans"] + (3 if new_graph else 2), after


class _WideStrides(torch.nn.Module):
    """AlexNet's stem: an 11x11 stride-4 convolution and unpadded stride-2 pools. Its sizes are
    floored by 4 at first, so over three heights in a row they can stay put (224 to 226 all give
    55), and past the pools each side is shifted from its multiple: (H - 7) // 4 + 1, then
    (that - 3) // 2 + 1, ..."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 11, stride=4, padding=2), torch.nn.ReLU(),
            torch.nn.MaxPool2d(3, 2), torch.nn.Conv2d(8, 16, 5, padding=2), torch.nn.ReLU(),
            torch.nn.MaxPool2d(3, 2))

    def forward(self, x):
        return self.body(x).flatten(1).sum(1, keepdim=True) + self.body(x).amax((2, 3))


@pytest.mark.parametrize("entry", ["torch.compile", "torchscript"])
def test_sides_floored_past_their_step_and_shifted_share_a_class(entry):
    """Square images of sides 128 to 320 in steps of 32 (the stem's stride product): the step
    is found by a distant import (three heights in a row look constant), and the sides past the
    pools are shifted factors, so one class serves them. Every output is eager's."""
    model, compiled = _image_model(_WideStrides, entry, side=224)
    with torch.no_grad():
        for side in (224, 256, 128, 288, 160, 320, 192, 256):
            x = torch.randn(1, 3, side, side)
            assert_close(compiled(x), model(x))
    stats = kiln.stats()
    graphs = stats["graphs"] - 1 if entry == "torch.compile" else 1
    assert stats["shape_classes"] == graphs and stats["fallbacks"] == 0, stats
    assert stats["specializations"] <= graphs + 2 and stats["class_plans"] >= 4, stats


class _TokenModel(torch.nn.Module):
    """Token and position embeddings, a fused projection split in three, and a cross entropy over
    the flattened tokens. Its backward takes tensors of [batch * tokens, vocab] (a size derived
    from two symbols), the [1, tokens] slice of a [1, 64] position buffer (a dim of one whose
    stride is the buffer's), and the split's thirds ([batch, tokens, 32] with strides
    [96 tokens, 96, 1]: not dense, strided as the graph declares)."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(50, 16)
        self.positions = torch.nn.Embedding(64, 16)
        self.register_buffer("position_ids", torch.arange(64)[None])
        self.up = torch.nn.Linear(16, 96)
        self.down = torch.nn.Linear(32, 50)

    def forward(self, ids):
        h = self.tokens(ids) + self.positions(self.position_ids[:, :ids.shape[1]])
        gate, value, bias = self.up(h).split(32, dim=-1)
        logits = self.down(torch.nn.functional.gelu(gate) * value + bias)
        return torch.nn.functional.cross_entropy(logits.view(-1, 50), ids.view(-1))


def test_training_over_batches_and_lengths_forms_classes_for_forward_and_backward():
    torch.manual_seed(0)
    torch._dynamo.reset()
    model, reference = _TokenModel(), _TokenModel()
    reference.load_state_dict(model.state_dict())
    compiled = torch.compile(model, backend="kiln")
    kiln.reset_stats()
    shapes = [(2, 9), (3, 9), (3, 14), (2, 20), (4, 11), (2, 5), (3, 31), (4, 17), (2, 12),
              (3, 6), (4, 25), (2, 40)]
    for batch, length in shapes:
        ids = torch.randint(0, 50, (batch, length))
        compiled(ids).backward()
        reference(ids).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            assert_close(p.grad, q.grad)
            p.grad, q.grad = None, None
    stats = kiln.stats()
    # dynamo's first graph is static (2 x 9); its second, with the batch symbolic, and its third,
    # with the length too, are a class each, forward and backward: every later shape is a plan.
    assert stats["fallbacks"] == 0 and stats["shape_classes"] >= 2, stats
    assert stats["specializations"] <= 6 and stats["class_plans"] >= 14, stats


class _CrossEntropy(torch.nn.Module):
    def forward(self, logits, labels):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 10), labels.reshape(-1))


def test_inputs_with_symbols_of_their_own_for_one_size_share_a_class():
    """dynamo's automatic dynamic sizes give each input symbols of its own: logits of
    [s88, s3, 10] beside labels of [s97, s38] (as a loss after a graph break gets them). A label
    dim cannot move alone (the cross entropy needs as many labels as rows), so choose_steps takes
    it as the logits' dim of the same size; the backward's flattened label count follows the
    logits' by value. Forward and backward are a class each; gradients are eager's."""
    torch._dynamo.reset()
    compiled = torch.compile(_CrossEntropy(), backend="kiln")
    kiln.reset_stats()
    for batch, length in [(2, 5), (3, 7), (4, 9), (2, 11), (5, 3), (3, 12), (4, 6)]:
        logits = torch.randn(batch, length, 10, requires_grad=True)
        labels = torch.randint(0, 10, (batch, length))
        compiled(logits, labels).backward()
        expected = logits.detach().clone().requires_grad_(True)
        torch.nn.functional.cross_entropy(expected.reshape(-1, 10), labels.reshape(-1)).backward()
        assert_close(logits.grad, expected.grad)
    stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["shape_classes"] == 2, stats
    assert stats["specializations"] == 4 and stats["class_plans"] >= 8, stats
