"""The `precision` option: bf16 convolutions and linears against float32 eager, by the
norm-relative error ||kiln - eager|| / ||eager|| (per-element relative error means nothing near
zero); the fallback where the CPU has no native bf16; training refused; autocast models."""

import json

import pytest
import torch
from torch import nn

import kiln
from child import run_child

# Rounding a unit-scale input and weight to bf16 (8 significant bits) moves each product by up to
# 2^-9 of it; over sums of tens to thousands of terms and a few layers the output moves ~1e-3 of
# its norm. 1e-2 is a bound no correct bf16 model of this depth should cross, and an error below
# 1e-5 means nothing was rounded (float32 alone differs by ~1e-7).
BF16_BOUND = 1e-2
ROUNDED = 1e-5

native = pytest.mark.skipif(not kiln._C.native_bf16(),
                            reason="this CPU has no native bf16 (AVX512-BF16 or AMX)")


def norm_relative_error(got, want):
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


class MobileBlock(nn.Module):
    """An inverted residual: 1x1 expansion, depthwise 3x3, 1x1 projection, residual add."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16),
                                  nn.ReLU6())
        self.expand = nn.Sequential(nn.Conv2d(16, 64, 1), nn.BatchNorm2d(64), nn.ReLU6())
        self.depthwise = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, groups=64),
                                       nn.BatchNorm2d(64), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(64, 16, 1), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.depthwise(self.expand(x)))
        return self.head(x.mean(dim=(2, 3)))


class BasicBlocks(nn.Module):
    """ResNet's stem, max pool and basic blocks: dense 3x3 convolutions that hand each other their
    activations, as inputs and as residuals, the first through the pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32)) for _ in range(2))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return self.head(x.mean(dim=(2, 3)))


class FeedForward(nn.Module):
    """A transformer's feed-forward half: layer norm, linear, GELU, linear, residual."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(96)
        self.up = nn.Linear(96, 384)
        self.down = nn.Linear(384, 96)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Attention(nn.Module):
    """A ViT's attention half: layer norm, one linear for q, k and v, ATen's fused attention
    (with a float additive mask where `masked`), the output projection, residual."""

    def __init__(self, masked=False):
        super().__init__()
        self.norm = nn.LayerNorm(96)
        self.qkv = nn.Linear(96, 288)
        self.proj = nn.Linear(96, 96)
        mask = torch.zeros(24, 24).masked_fill(torch.rand(24, 24) < 0.3, -1e4) if masked else None
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, n, 3, 3, c // 3).permute(2, 0, 3, 1, 4).unbind(0)
        heads = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
        return x + self.proj(heads.transpose(1, 2).reshape(b, n, c))


class RotaryAttention(nn.Module):
    """A Llama's attention half: q, k and v linears, a rotary embedding of q and k (a generated
    kernel), causal attention, the output projection."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(96, 96, bias=False) for _ in range(4))
        angles = torch.arange(24)[:, None] * 0.1 ** torch.linspace(0, 1, 16)[None]
        self.register_buffer("cos", torch.cat([angles, angles], -1).cos())
        self.register_buffer("sin", torch.cat([angles, angles], -1).sin())

    def rotate(self, x):
        half = x.shape[-1] // 2
        return x * self.cos + torch.cat([-x[..., half:], x[..., :half]], -1) * self.sin

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = (f(x).view(b, n, 3, c // 3).transpose(1, 2) for f in (self.q, self.k, self.v))
        heads = nn.functional.scaled_dot_product_attention(self.rotate(q), self.rotate(k), v,
                                                           is_causal=True)
        return x + self.o(heads.transpose(1, 2).reshape(b, n, c))


class WrittenAttention(nn.Module):
    """BERT's eager attention: q, k and v linears, q k^T / sqrt(d) plus an additive mask, softmax,
    the product with v, the output projection."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(96, 96) for _ in range(4))
        self.register_buffer("mask", torch.zeros(2, 1, 1, 24).index_fill_(3, torch.arange(18, 24),
                                                                          -1e4))

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = (f(x).view(b, n, 3, c // 3).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (c // 3) ** 0.5 + self.mask[:b]
        heads = torch.matmul(scores.softmax(dim=-1), v)
        return x + self.o(heads.transpose(1, 2).reshape(b, n, c))


class CausalAttention(WrittenAttention):
    """nanoGPT's attention without flash: the scores filled with -inf above the diagonal of a
    lower-triangular buffer (`masked_fill`; dynamo writes it as a `where`)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones(24, 24)).view(1, 1, 24, 24))

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = (f(x).view(b, n, 3, c // 3).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (c // 3) ** -0.5
        scores = scores.masked_fill(self.causal[:, :, :n, :n] == 0, float("-inf"))
        heads = torch.matmul(scores.softmax(dim=-1), v)
        return x + self.o(heads.transpose(1, 2).reshape(b, n, c))


def _cases():
    torch.manual_seed(0)
    # The last: one row, so kiln computes its linears in its own kernels (reading bf16 weights).
    return [(MobileBlock().eval(), torch.randn(2, 3, 32, 32)),
            (FeedForward().eval(), torch.randn(2, 24, 96)),
            (nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).eval(),
             torch.randn(1, 256)),
            (BasicBlocks().eval(), torch.randn(2, 3, 32, 32)),
            (Attention().eval(), torch.randn(2, 24, 96)),
            (Attention(masked=True).eval(), torch.randn(2, 24, 96)),
            (RotaryAttention().eval(), torch.randn(2, 24, 96)),
            (WrittenAttention().eval(), torch.randn(2, 24, 96)),
            (CausalAttention().eval(), torch.randn(2, 24, 96))]


def _randomize(model):
    for m in model.modules():  # batch norms that do something, so folding them is checked
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model


@native
@pytest.mark.parametrize("case", [0, 1, 2, 3, 4, 5, 6, 7, 8], ids=["mobile_block",
                         "feed_forward", "row_mlp", "basic_blocks", "attention", "masked_attention",
                         "rotary", "written_attention", "causal_attention"])
def test_bf16_stays_within_its_bound_of_float32_eager_on_both_entry_points(case):
    model, x = _cases()[case]
    _randomize(model)
    with torch.no_grad():
        want = model(x)
        torch._dynamo.reset()
        fp32 = torch.compile(model, backend="kiln", options={"precision": "fp32"})(x)
        torch._dynamo.reset()
        bf16 = torch.compile(model, backend="kiln", options={"precision": "bf16"})(x)
        compiled = kiln.compile(torch.jit.trace(model, (x,)), options={"precision": "bf16"})
        script = compiled(x)
    assert ("reading its weight as bf16" if case == 2 else "multiplying in bf16") in \
        compiled.explain(x)
    assert norm_relative_error(fp32, want) < 1e-6
    for got in (bf16, script):
        error = norm_relative_error(got, want)
        assert ROUNDED < error < BF16_BOUND, error


def _bf16_plan(model, x, tmp_path) -> str:
    """The final graph (after plan_memory) of `model` compiled with torch.compile under bf16."""
    with torch.no_grad():
        torch._dynamo.reset()
        torch.compile(model, backend="kiln",
                      options={"precision": "bf16", "dump_dir": str(tmp_path)})(x)
    return sorted(tmp_path.glob("*plan_memory.kir"))[-1].read_text()


@native
@pytest.mark.parametrize("case,op", [(0, "kiln::onednn_conv2d("), (1, "kiln::onednn_linear(")],
                         ids=["mobile_block", "feed_forward"])
def test_bf16_is_written_into_the_plan_and_winograd_steps_aside(case, op, tmp_path):
    model, x = _cases()[case]
    final = _bf16_plan(model, x, tmp_path)
    steps = [line for line in final.splitlines() if "= kiln::onednn_" in line]
    assert any(op in line for line in steps), final
    # Every oneDNN step multiplies in bf16 but the depthwise convolution and the 3-channel stem
    # (reading the image; each pixel meets 16 * 9 / 4 weights), which multiply too little a value
    # to pay for it; the packed weights were folded into constants.
    for line in steps:
        narrow = "groups=64" in line or "(%in0," in line
        assert ('precision="bf16"' in line) != narrow, line
    assert "winograd" not in final


@native
def test_bf16_convolutions_hand_each_other_bf16_activations(tmp_path):
    model, x = _cases()[3]
    final = _bf16_plan(model, x, tmp_path)
    convs = [line.strip() for line in final.splitlines() if "= kiln::onednn_conv2d(" in line]
    assert len(convs) == 5, final
    # Each convolution's output is read by bf16 convolutions alone (as input or residual) but the
    # last one's, which the mean reads: that one stays float32.
    for line in convs[:-1]:
        assert " : bf16[" in line and 'out_precision="bf16"' in line, final
    assert " : f32[" in convs[-1] and "out_precision" not in convs[-1], final
    pools = [line for line in final.splitlines() if "= kiln::onednn_max_pool2d(" in line]
    assert len(pools) == 1 and " : bf16[" in pools[0], final
    compiled = kiln.compile(torch.jit.trace(model, (x,)), options={"precision": "bf16"})
    with torch.no_grad():
        compiled(x)
    assert compiled.explain(x).count("multiplying in bf16, writing bf16") == 4


@native
def test_a_feed_forward_block_hands_its_linears_bf16_activations(tmp_path):
    model, x = _cases()[1]
    final = _bf16_plan(model, x, tmp_path)
    up, down = [line.strip() for line in final.splitlines() if "= kiln::onednn_linear(" in line]
    # The first linear (its GELU a post-op) writes bf16 for the second alone; the second's output,
    # which the residual add reads, stays float32.
    assert " : bf16[" in up and 'out_precision="bf16"' in up, final
    assert " : f32[" in down and "out_precision" not in down, final
    # The first reads a bf16 copy of the layer norm's output, which the layer norm's kernel writes
    # instead of the float32 one (nothing else reads that).
    kernel = next(line.strip() for line in final.splitlines()
                  if "= kiln::fused(" in line and "layer_norm" in line)
    written = [out.split(" : ") for out in kernel.split(" = ")[0].split(", ")]
    assert [dtype[:5] for _, dtype in written] == ["bf16["], kernel
    assert f"kiln::onednn_linear({written[0][0]}," in up, final
    compiled = kiln.compile(torch.jit.trace(model, (x,)), options={"precision": "bf16"})
    with torch.no_grad():
        compiled(x)
    explained = compiled.explain(x)
    assert explained.count("multiplying in bf16, writing bf16") == 1, explained
    entries = json.loads(explained)["entries"]
    norm = next(e for e in entries if e["op"] == "aten::layer_norm")
    assert any(e["op"] == "aten::_to_copy" and e["why"] == norm["why"] for e in entries), explained


@native
@pytest.mark.parametrize("case", [4, 5], ids=["attention", "masked_attention"])
def test_attention_between_bf16_linears_computes_in_bf16_on_both_entry_points(case, tmp_path):
    model, x = _cases()[case]
    final = _bf16_plan(model, x, tmp_path / "dynamo")
    with torch.no_grad():
        kiln.compile(torch.jit.trace(model, (x,)),
                     options={"precision": "bf16", "dump_dir": str(tmp_path / "ts")})(x)
    script = sorted((tmp_path / "ts").glob("*plan_memory.kir"))[-1].read_text()
    for graph, op in ((final, "aten::_scaled_dot_product_flash_attention_for_cpu("),
                      (script, "aten::scaled_dot_product_attention(")):
        attention = next(line.strip() for line in graph.splitlines() if op in line)
        # q, k and v are views of the first linear's bf16 output; the attention writes bf16 for
        # the projection, whose output (the residual add reads it) stays float32.
        assert attention.split(" : ")[1].startswith("bf16["), graph
        qkv, proj = [line.strip() for line in graph.splitlines() if "= kiln::onednn_linear(" in line]
        assert " : bf16[" in qkv and 'out_precision="bf16"' in qkv, graph
        assert " : f32[" in proj and "out_precision" not in proj, graph
        if case == 5:  # the float32 mask is read as it is: no bf16 copy of it
            assert "f32[24,24]" in graph and "bf16[24,24]" not in graph, graph


@native
def test_rotary_kernels_write_bf16_for_the_attention_they_feed(tmp_path):
    model, x = _cases()[6]
    final = _bf16_plan(model, x, tmp_path)
    attention = next(line.strip() for line in final.splitlines()
                     if "aten::_scaled_dot_product_flash_attention_for_cpu(" in line)
    assert attention.split(" : ")[1].startswith("bf16["), final
    # q and k: the rotary kernels write them in bf16 alone (nothing else reads them); v: a view
    # of its bf16 linear's output.
    operands = attention.split("(")[1].split(")")[0].split(", ")
    written = {line.split(" : ")[0].strip(): line.split(" : ")[1][:5]
               for line in final.splitlines() if " = kiln::fused(" in line}
    assert [written.get(name) for name in operands[:2]] == ["bf16[", "bf16["], final
    linears = [line.strip() for line in final.splitlines() if "= kiln::onednn_linear(" in line]
    assert sum('out_precision="bf16"' in line for line in linears) == 1, final  # v's


@native
@pytest.mark.parametrize("case", [7, 8], ids=["additive_mask", "causal_fill"])
def test_attention_written_out_becomes_the_fused_one_in_bf16_only(case, tmp_path):
    model, x = _cases()[case]
    final = _bf16_plan(model, x, tmp_path / "bf16")
    with torch.no_grad():
        kiln.compile(torch.jit.trace(model, (x,)),
                     options={"precision": "bf16", "dump_dir": str(tmp_path / "ts")})(x)
    script = sorted((tmp_path / "ts").glob("*plan_memory.kir"))[-1].read_text()
    for graph in (final, script):
        attention = [line.strip() for line in graph.splitlines()
                     if "= aten::scaled_dot_product_attention(" in line]
        assert len(attention) == 1 and attention[0].split(" : ")[1].startswith("bf16["), graph
        assert "aten::bmm(" not in graph and "softmax" not in graph, graph
        # The causal fill became an additive float32 mask, computed once from the buffer.
        assert "where" not in graph and "masked_fill" not in graph, graph
    with torch.no_grad():  # in float32 the products stay as written
        torch._dynamo.reset()
        torch.compile(model, backend="kiln",
                      options={"precision": "fp32", "dump_dir": str(tmp_path / "fp32")})(x)
    fp32 = sorted((tmp_path / "fp32").glob("*plan_memory.kir"))[-1].read_text()
    assert "aten::bmm(" in fp32 and "scaled_dot_product" not in fp32, fp32


@native
def test_a_linear_of_few_rows_reads_its_weight_as_bf16_in_kilns_own_kernel(tmp_path):
    model, x = _cases()[2]
    final = _bf16_plan(model, x, tmp_path)
    linears = [line.strip() for line in final.splitlines() if "= aten::linear(" in line]
    # Both linears inside kernels, each reading a bf16 weight (a folded constant) into a float32
    # product; no oneDNN step.
    assert len(linears) == 2 and "kiln::onednn_" not in final, final
    for line in linears:
        weight = line.split("aten::linear(")[1].split(",")[1].strip()
        assert f"{weight} : bf16[" in final and line.split(" : ")[1].startswith("f32["), final


def test_without_native_bf16_it_warns_once_and_runs_fp32():
    out = run_child("""
import os, torch, kiln
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 8)).eval()
x = torch.randn(4, 64)
with torch.no_grad():
    torch._dynamo.reset()
    fp32 = torch.compile(model, backend="kiln")(x)
    torch._dynamo.reset()
    bf16 = torch.compile(model, backend="kiln", options={"precision": "bf16"})(x)
    torch._dynamo.reset()
    try:
        torch.compile(model, backend="kiln", options={"precision": "bf16", "strict": True})(x)
        print("strict: ran")
    except Exception as error:
        print("strict:", "no native bf16" in str(error))
print("native:", kiln._C.native_bf16())
print("equal:", torch.equal(fp32, bf16))
""", env={"KILN_NATIVE_BF16": "0", "KILN_LOG": "warn"}, stderr=True)
    assert "native: False" in out and "equal: True" in out and "strict: True" in out, out
    assert out.count("running fp32") == 1, out


def test_a_training_graph_in_bf16_is_an_error_that_says_so():
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    x = torch.randn(4, 16)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="kiln", options={"precision": "bf16"})
    with pytest.raises(Exception, match="precision='bf16' is for inference"):
        compiled(x).sum().backward()
    script = kiln.compile(torch.jit.trace(model, (x,)), options={"precision": "bf16"})
    with pytest.raises(Exception, match="precision=bf16 is for inference"):
        script(x.requires_grad_())


def test_a_model_under_autocast_runs_its_bf16_ops_as_eager_does():
    model, x = _cases()[1]
    with torch.no_grad():
        exact = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = model(x)
            torch._dynamo.reset()
            got = torch.compile(model, backend="kiln")(x)
    assert got.dtype == want.dtype
    assert norm_relative_error(want, exact) > ROUNDED  # eager did take its linears in bf16
    # Both round the same products to bf16; kiln's fused elementwise ops may keep float32 where
    # eager rounds after each: within bf16's own resolution of eager.
    assert norm_relative_error(got, want) < BF16_BOUND


@native
def test_a_stream_of_sequence_lengths_under_bf16_compiles_one_shape_class():
    """An encoder under bf16 over a serving stream of lengths: one class for dynamo's graph with
    symbolic sizes serves them all, each within bf16's bound, none in eager PyTorch."""
    torch.manual_seed(0)
    model = nn.Sequential(Attention(), FeedForward()).eval()
    compiled = torch.compile(model, backend="kiln", options={"precision": "bf16"})
    torch._dynamo.reset()
    kiln.reset_stats()
    with torch.no_grad():
        for tokens in (24, 17, 30, 9, 41, 12, 33, 20, 27, 15, 38, 6):
            x = torch.randn(2, tokens, 96)
            error = norm_relative_error(compiled(x), model(x))
            assert ROUNDED < error < BF16_BOUND, (tokens, error)
    stats = kiln.stats()
    assert stats["fallbacks"] == 0, stats
    assert stats["specializations"] <= 3 and stats["shape_classes"] >= 1, stats


class DecodeStep(nn.Module):
    """One token through a decoder layer with a key/value cache: its linears have one row, so kiln
    computes them in kernels of its own, and the cache grows by a row a call."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(96)
        self.q, self.k, self.v, self.o = (nn.Linear(96, 96) for _ in range(4))
        self.feed_forward = FeedForward()

    def forward(self, x, past_k, past_v):
        heads = lambda t: t.view(1, 1, 3, 32).transpose(1, 2)  # noqa: E731
        h = self.norm(x)
        k = torch.cat([past_k, heads(self.k(h))], dim=2)
        v = torch.cat([past_v, heads(self.v(h))], dim=2)
        att = nn.functional.scaled_dot_product_attention(heads(self.q(h)), k, v)
        return self.feed_forward(x + self.o(att.transpose(1, 2).reshape(1, 1, 96))), k, v


@native
def test_a_decoding_stream_under_bf16_compiles_one_shape_class():
    """The passes that choose bf16 decide by sizes (a linear of a few rows computed in a kernel)
    the same way at every binding of a shape class, however their search goes, so a decoder's
    growing cache never runs out of specializations into eager PyTorch."""
    torch.manual_seed(0)
    model = DecodeStep().eval()
    compiled = torch.compile(model, backend="kiln", options={"precision": "bf16"})
    torch._dynamo.reset()
    kiln.reset_stats()
    with torch.no_grad():
        k, v = torch.randn(1, 3, 4, 32), torch.randn(1, 3, 4, 32)
        for _ in range(16):
            x = torch.randn(1, 1, 96)
            got, want = compiled(x, k, v), model(x, k, v)
            for a, b in zip(got, want):
                assert a.shape == b.shape and norm_relative_error(a, b) < BF16_BOUND
            assert ROUNDED < norm_relative_error(got[0], want[0])
            k, v = want[1], want[2]
    stats = kiln.stats()
    assert stats["fallbacks"] == 0, stats
    # The first length on its own, then one class for dynamo's graph with symbolic sizes.
    assert stats["specializations"] <= 3 and stats["shape_classes"] >= 1, stats
