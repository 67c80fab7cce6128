"""Graph passes (canonicalize, batch-norm folding, constant folding, CSE) on real models: after
all passes kiln matches eager, and a conv net still matches with each pass turned off."""

import copy
import json
import math
import os
import re

import pytest
import torch

import kiln
from child import run_child
from models import (ConvNet, assert_close, explained_ops, randomize_batch_norms,
                    traced_after_checking_both_entry_points)

# Frozen convolutions and linears run on kiln's own oneDNN primitives where kiln was built with
# them (cmake/OneDNN.cmake), else on ATen's oneDNN ops.
_OWN_ONEDNN = hasattr(torch.ops.kiln, "onednn_conv2d")
_ONEDNN_CONV = "kiln::onednn_conv2d" if _OWN_ONEDNN else "mkldnn::_convolution_pointwise"
_ONEDNN_LINEAR = "kiln::onednn_linear" if _OWN_ONEDNN else "mkldnn::_linear_pointwise"


def _vision(name):
    torchvision = pytest.importorskip("torchvision")
    return randomize_batch_norms(getattr(torchvision.models, name)(weights=None).eval())


def _bert_layer():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bert.modeling_bert import BertLayer

    # Big enough that prepack_linear packs its linears (128 rows x 256 x 256 and up).
    config = transformers.BertConfig(hidden_size=256, num_attention_heads=4, intermediate_size=512)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = BertLayer(config)

        def forward(self, x):
            return self.layer(x)[0]

    return Layer().eval()


@pytest.mark.parametrize("make_model,shape", [
    (lambda: _vision("resnet18"), (1, 3, 64, 64)),
    (lambda: _vision("mobilenet_v2"), (2, 3, 64, 64)),
    (_bert_layer, (2, 64, 256)),
])
def test_models_match_eager_after_all_passes(make_model, shape):
    model = make_model()
    x = torch.randn(shape)
    with torch.no_grad():
        expected = model(x)
        assert_close(torch.compile(model, backend="kiln")(x), expected, atol=1e-4, rtol=1e-4)
        traced = torch.jit.trace(model, (x,), check_trace=False)
        assert_close(kiln.compile(traced)(x), expected, atol=1e-4, rtol=1e-4)


def test_batch_norms_of_a_scripted_resnet_are_folded():
    model = _vision("resnet18")
    x = torch.randn(1, 3, 64, 64)
    # kiln's own fold_batch_norm (prepack_conv off: the convolutions stay aten::conv2d)
    code = (
        "import json, sys, torch, kiln\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_graph_passes import _vision\n"
        "from models import explained_ops\n"
        "torch.manual_seed(0)\n"
        "m = _vision('resnet18'); x = torch.randn(1, 3, 64, 64)\n"
        "c = kiln.compile(torch.jit.script(m))\n"
        "with torch.no_grad():\n"
        "    torch.testing.assert_close(c(x), m(x), atol=1e-4, rtol=1e-4)\n"
        "ops = explained_ops(c, x)\n"
        "assert 'aten::batch_norm' not in ops, ops\n"
        "assert sum(op == 'aten::conv2d' for op in ops) == 20, ops\n"
        "print('ok')\n")
    assert run_child(code, disabled="prepack_conv").strip().endswith("ok")
    # by default: folded, channels-last, with weights packed or transformed at compile time, every
    # relu and the 8 residual adds inside the convolutions, for scripted and traced graphs alike:
    # the 7 3x3 stride-1 convolutions of 64 and 128 channels by Winograd (winograd_conv's rule
    # leaves the 256- and 512-channel ones to oneDNN at batch 1), the other 13 on oneDNN
    for capture in (torch.jit.script, lambda m: torch.jit.trace(m, (x,))):
        compiled = kiln.compile(capture(model))
        with torch.no_grad():
            assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        entries = json.loads(compiled.explain(x))["entries"]
        ops = [e["op"] for e in entries]
        assert "aten::batch_norm" not in ops and "aten::relu" not in ops, ops
        assert ops.count("kiln::winograd_conv2d") == 7, ops
        assert ops.count(_ONEDNN_CONV) == 13, ops
        assert sum("residual add inside" in e["why"] for e in entries) == 8, entries
        assert not any(op.startswith("aten::add") for op in ops), ops


class _UnfoldableBatchNorms(torch.nn.Module):
    """Batch norms with no convolution or linear to fold into: after a concatenation and a relu
    (DenseNet's pre-activation order), after an add on a channels-last tensor, over the channels
    of a [N, C, L] sequence and of a [N, C] matrix after a reshape (LeViT's)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn_cat = torch.nn.BatchNorm2d(11)
        self.bn_add = torch.nn.BatchNorm2d(8, affine=False)
        self.bn_seq = torch.nn.BatchNorm1d(8)
        self.linear = torch.nn.Linear(8, 6)
        self.bn_flat = torch.nn.BatchNorm1d(6, eps=1e-3)

    def forward(self, x):
        y = self.conv(x)
        a = torch.relu(self.bn_cat(torch.cat([x, y], 1)))
        b = self.bn_add((y + 1).contiguous(memory_format=torch.channels_last)).sigmoid()
        c = self.bn_seq(y.flatten(2)) * 2
        d = self.linear(y.mean((2, 3)).unsqueeze(1)).flatten(0, 1)
        return a, b, c, torch.tanh(self.bn_flat(d))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norms_with_nothing_to_fold_into_fuse_with_their_neighbours(dtype):
    torch.manual_seed(0)
    model = randomize_batch_norms(_UnfoldableBatchNorms().eval()).to(dtype)
    x = torch.randn(2, 3, 6, 6, dtype=dtype)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    with torch.no_grad():
        expected = model(x)
        traced = kiln.compile(torch.jit.trace(model, (x,)))
        assert_close(traced(x), expected, atol=tolerance, rtol=tolerance)
        assert_close(torch.compile(model, backend="kiln")(x), expected, atol=tolerance,
                     rtol=tolerance)
    entries = json.loads(traced.explain(x))["entries"]
    norms = [e for e in entries if "batch_norm" in e["op"]]
    assert not norms, norms
    # each batch norm is a multiply and an add in the kernel of its neighbour
    fused = [e for e in entries if e["where"] == "fused kernel"]
    assert sum(e["op"] == "aten::mul.Tensor" for e in fused) >= 4, entries
    # with the activation after it: scale, shift and activation in one kernel
    ops_in_kernel = {e["op"]: int(re.search(r"\((\d+) ops\)", e["why"]).group(1)) for e in fused}
    for op in ("aten::relu", "aten::sigmoid", "aten::tanh"):
        assert ops_in_kernel[op] >= 3, entries


def test_a_half_precision_batch_norm_stays_with_aten():
    # ATen normalizes float16 in float32 and rounds once; x * scale + shift would round twice.
    model = randomize_batch_norms(torch.nn.Sequential(torch.nn.BatchNorm1d(8)).eval())
    x = torch.randn(4, 8)
    compiled = kiln.compile(torch.jit.trace(model, (x,)))
    assert "aten::batch_norm" not in explained_ops(compiled, x)
    model_half = model.to(torch.bfloat16)
    xh = x.to(torch.bfloat16)
    compiled_half = kiln.compile(torch.jit.trace(model_half, (xh,)))
    with torch.no_grad():
        assert torch.equal(compiled_half(xh), model_half(xh))
    assert "aten::batch_norm" in explained_ops(compiled_half, xh)


class _GroupNorms(torch.nn.Module):
    """Group norms as UNets and diffusion models use them: after convolutions that run
    channels-last, with a SiLU; over a [N, C, L] sequence; and one without affine parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.norm1 = torch.nn.GroupNorm(4, 16)
        self.conv2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.norm_seq = torch.nn.GroupNorm(8, 16, eps=1e-3)
        self.norm_plain = torch.nn.GroupNorm(2, 16, affine=False)

    def forward(self, x):
        y = self.conv2(torch.nn.functional.silu(self.norm1(self.conv1(x))))
        return y, self.norm_seq(y.flatten(2)) * 2, self.norm_plain(y + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_group_norms_become_statistics_and_a_per_channel_scale_and_shift(dtype, tmp_path):
    torch.manual_seed(0)
    model = _GroupNorms().eval().to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("norm"):
                p.uniform_(0.5, 1.5) if name.endswith("weight") else p.uniform_(-0.5, 0.5)
    x = torch.randn(2, 3, 12, 12, dtype=dtype) * 3 + 1
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    with torch.no_grad():
        expected = model(x)
        traced = kiln.compile(torch.jit.trace(model, (x,)))
        assert_close(traced(x), expected, atol=tolerance, rtol=tolerance)
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), expected, atol=tolerance, rtol=tolerance)
    # torch.compile: an inference graph keeps native_group_norm for kiln's own decomposition
    # (per-channel statistics, read straight from the convolution's channels-last output); the
    # one without a weight stays
    ir = _final_ir(tmp_path)
    assert ir.count("= aten::native_group_norm(") == 1, ir
    assert "{dim=[2,3], correction=0, keepdim=true}" in ir, ir
    entries = json.loads(traced.explain(x))["entries"]
    # the two affine group norms are decomposed; the one without a weight stays ATen's
    assert sum(e["op"] == "aten::group_norm" for e in entries) == 1, entries
    fused = [e for e in entries if e["where"] == "fused kernel"]
    # per norm: the variance per channel over x, and the variance of the channel means per group
    assert sum(e["op"] == "aten::var.correction" for e in fused) == 4, entries
    # the scale and shift of the first norm, and the SiLU after it, share one kernel
    ops_in_kernel = {e["op"]: int(re.search(r"\((\d+) ops\)", e["why"]).group(1)) for e in fused}
    assert ops_in_kernel["aten::silu"] >= 3, entries


def test_a_channels_last_group_norm_keeps_eagers_layout():
    # ATen's CPU group norm returns a channels-last input's layout; a meta run of group_norm
    # says contiguous, which would also make kiln's last kernel a transpose.
    torch.manual_seed(0)
    norm = torch.nn.GroupNorm(8, 32).eval()
    model = torch.nn.Sequential(norm, torch.nn.SiLU())
    x = torch.randn(2, 32, 10, 10).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        expected = model(x)
        for compiled in (torch.compile(model, backend="kiln"),
                         kiln.compile(torch.jit.trace(model, (x,)))):
            got = compiled(x)
            assert_close(got, expected, atol=1e-5, rtol=1e-5)
            assert got.stride() == expected.stride() == x.stride(), got.stride()


class _LayoutCopies(torch.nn.Module):
    """Copies into another layout: attention's heads made contiguous after a transpose, inside a
    chain of elementwise ops, and a tensor to and from channels-last."""

    def forward(self, x, image):
        heads = (x * 2).transpose(1, 2).contiguous() + 1
        last = image.contiguous(memory_format=torch.channels_last)
        return heads, x.transpose(1, 2).contiguous(), last, torch.relu(last).contiguous()


def test_layout_copies_run_in_kernels():
    torch.manual_seed(0)
    model = _LayoutCopies()
    inputs = (torch.randn(2, 5, 3, 4), torch.randn(2, 6, 4, 5))
    expected = model(*inputs)
    for compiled in (torch.compile(model, backend="kiln"),
                     kiln.compile(torch.jit.trace(model, inputs))):
        with torch.no_grad():
            got = compiled(*inputs)
        for g, e in zip(got, expected):
            assert_close(g, e)
            assert g.stride() == e.stride()
    entries = json.loads(compiled.explain(*inputs))["entries"]
    copies = [e for e in entries if e["op"] in ("aten::clone", "aten::contiguous")]
    assert len(copies) == 4 and all(e["where"] == "fused kernel" for e in copies), entries
    # the first one in a kernel with the add after it (the transpose before it is a view, which
    # the fusers do not fuse through)
    assert "(2 ops)" in copies[0]["why"], entries


class _WideBlock(torch.nn.Module):
    """A residual block of 64-channel 3x3 convolutions, as winograd_conv takes them."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(64, 64, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.relu(self.conv2(torch.relu(self.conv1(x))) + x)


def test_wide_3x3_convolutions_run_by_winograd(tmp_path):
    model = _WideBlock().eval()
    x = torch.randn(2, 64, 20, 13)
    with torch.no_grad():
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        # A NaN reaches exactly the outputs eager's convolutions take it to.
        x[1, 5, 7, 3] = float("nan")
        got, want = compiled(x), model(x)
        assert torch.equal(got.isnan(), want.isnan()) and got.isnan().any()
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True)
    ir = _final_ir(tmp_path)
    lines = [line for line in ir.splitlines() if "= kiln::winograd_conv2d(" in line]
    assert len(lines) == 2, ir
    assert 'other=None, activation="relu"' in lines[0] and "bias=None" in lines[1], ir
    assert "mkldnn::_convolution" not in ir and "kiln::winograd_weight" not in ir, ir


class _GatedBlock(torch.nn.Module):
    """A convolution and a squeeze-and-excitation gate (torchvision's, as in MobileNetV3 and
    EfficientNet): channel means, two 1x1 convolutions over that one pixel, a sigmoid, a
    multiply."""

    def __init__(self):
        super().__init__()
        torchvision = pytest.importorskip("torchvision")
        self.conv = torch.nn.Sequential(torch.nn.Conv2d(3, 48, 3, padding=1),
                                        torch.nn.BatchNorm2d(48), torch.nn.ReLU())
        self.gate = torchvision.ops.SqueezeExcitation(48, 12)

    def forward(self, x):
        return self.gate(self.conv(x))


@pytest.mark.parametrize("batch", [1, 8])
def test_one_pixel_convolutions_run_as_linears(batch, tmp_path):
    model = randomize_batch_norms(_GatedBlock().eval())
    x = torch.randn(batch, 3, 12, 12)
    ir = _compiled_ir(model, x, tmp_path)
    with torch.no_grad():
        assert_close(kiln.compile(torch.jit.trace(model, (x,)))(x), model(x), atol=1e-4,
                     rtol=1e-4)
    # The gate's two convolutions are linears: in kiln's kernels at one row, on oneDNN's matmul
    # at eight; only the 3x3 convolution is one.
    linears = ir.count("= aten::linear(") if batch == 1 else ir.count(f"= {_ONEDNN_LINEAR}(")
    assert linears == 2, ir
    assert ir.count(f"= {_ONEDNN_CONV}(") + ir.count("= kiln::winograd_conv2d(") == 1, ir


def test_residual_adds_run_inside_without_copying_the_identity(tmp_path):
    # ResNet-18's 8 residual adds run inside its convolutions and no feature map is copied: kiln's
    # own oneDNN convolutions read the identity where it lies (a binary post-op); ATen's op, where
    # kiln is built without them, runs in place over the dying identity (its functional form
    # copies it); the Winograd ones add it in their output transform.
    model = _vision("resnet18")
    x = torch.randn(2, 3, 64, 64)
    before = x.clone()
    with torch.no_grad():
        expected = model(x)
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        compiled(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True) as prof:
            got = compiled(x)
    assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert torch.equal(x, before)
    ir = _final_ir(tmp_path)
    residuals = {op: sum("other=None" not in line for line in ir.splitlines() if f"= {op}(" in line)
                 for op in ("kiln::onednn_conv2d", "kiln::winograd_conv2d")}
    onednn_residuals = (residuals["kiln::onednn_conv2d"] if _OWN_ONEDNN
                        else ir.count("= mkldnn::_convolution_pointwise.binary("))
    assert onednn_residuals > 0, ir
    assert onednn_residuals + residuals["kiln::winograd_conv2d"] == 8, ir
    names = [e.name for e in prof.events()]
    if not _OWN_ONEDNN:
        assert names.count("mkldnn::_convolution_pointwise_") == onednn_residuals, names
        assert "mkldnn::_convolution_pointwise.binary" not in names
    feature_map_copies = [e for e in prof.events()
                          if e.name == "aten::copy_" and len(e.input_shapes[0]) == 4]
    assert not feature_map_copies, feature_map_copies


PASSES = ["canonicalize", "recognize_gelu", "fold_batch_norm", "merge_conv_branches",
          "decompose_batch_norm",
          "decompose_group_norm", "assign_layout", "conv_as_linear", "prepack_linear",
          "prepack_conv", "winograd_conv", "onednn_conv", "onednn_pool", "recognize_attention",
          "bf16_activations", "fold_constants", "eliminate_dead_code",
          "eliminate_common_subexpressions", "fuse_reductions", "fuse_epilogue", "fuse_elementwise",
          "lower_kernels", "split_reductions", "plan_memory"]


def test_pass_names_are_the_pipelines():
    code = ("import kiln, torch\n"
            "print(kiln._C.pass_names())\n")
    assert eval(run_child(code).strip().splitlines()[-1]) == PASSES


@pytest.mark.parametrize("disabled", PASSES + ["freeze_weights"])
def test_a_conv_net_matches_eager_with_each_pass_disabled(disabled):
    code = (
        "import sys, torch, kiln\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from models import ConvNet, randomize_batch_norms\n"
        "torch.manual_seed(0)\n"
        "m = randomize_batch_norms(ConvNet().eval())\n"
        "x = torch.randn(2, 3, 16, 16)\n"
        "with torch.no_grad():\n"
        "    ref = m(x)\n"
        "    torch.testing.assert_close(kiln.compile(torch.jit.script(m))(x), ref, atol=1e-4, rtol=1e-4)\n"
        "    torch.testing.assert_close(torch.compile(m, backend='kiln')(x), ref, atol=1e-4, rtol=1e-4)\n"
        "print('ok')\n"
    )
    assert run_child(code, disabled=disabled).strip().endswith("ok")


class _MatmulBias(torch.nn.Module):
    """x @ w.t() + b spelled out, as hand-written attention and MLP code does."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(48, 32))
        self.b1 = torch.nn.Parameter(torch.randn(48))
        self.w2 = torch.nn.Parameter(torch.randn(16, 48))

    def forward(self, x):
        h = torch.tanh(torch.matmul(x, self.w1.t()) + self.b1)
        return torch.matmul(h, self.w2.t()) * 0.5


def test_matmul_of_a_transposed_weight_becomes_linear_with_an_epilogue():
    model = _MatmulBias().eval()
    x = torch.randn(4, 8, 32)
    compiled = kiln.compile(torch.jit.script(model))
    with torch.no_grad():
        # linear without a bias is matmul(x, w.t()) in ATen; tanh in the kernel is within a few
        # ulp of eager's.
        assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    explanation = json.loads(compiled.explain(x))
    ops = [e["op"] for e in explanation["entries"]]
    # Small linears: ATen's, or kiln's own oneDNN matmul, which has no fixed cost to amortize.
    linear = _ONEDNN_LINEAR if _OWN_ONEDNN else "aten::linear"
    assert "aten::matmul" not in ops and ops.count(linear) == 2, ops
    where = {e["op"]: e["where"] for e in explanation["entries"]}
    assert where["aten::tanh"] == "fused kernel", where
    # The first epilogue reads the GEMM output, an arena buffer that dies there, and writes
    # its result over it.
    assert explanation["in_place_writes"] >= 1, explanation


class _FeatureMaps(torch.nn.Module):
    """A small backbone that returns its 4-D feature map (a caller may view it)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        return torch.relu(self.conv2(y) + y)


def test_convolutions_run_channels_last_inside_and_return_eagers_layout():
    model = _FeatureMaps().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        for compiled in (torch.compile(model, backend="kiln"), kiln.compile(torch.jit.script(model))):
            out = compiled(x)
            assert_close(out, expected, atol=1e-5, rtol=1e-4)
            assert out.stride() == expected.stride()
            out.view(2, -1)  # still a contiguous tensor
    # The image is converted in, the feature map out; the weights are packed at compile time.
    code = (
        "import json, sys, torch, kiln\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_graph_passes import _FeatureMaps\n"
        "m = _FeatureMaps().eval(); x = torch.randn(2, 3, 16, 16)\n"
        "c = kiln.compile(torch.jit.script(m))\n"
        "e = json.loads(c.explain(x))\n"
        "print(e['channels_last_conversions'], e['onednn_conversions'], e['layout_conversions'])\n")
    assert run_child(code).split() == ["2", "0", "2"]
    assert run_child(code, disabled="assign_layout").split() == ["0", "0", "0"]


class _TokenMixer(torch.nn.Module):
    """MLP-Mixer's layout: a patch embedding's tokens, `flatten(2).transpose(1, 2)`, mixed across
    tokens through a transpose and added to the stream, which eager keeps channel-major."""

    def __init__(self, dim=32, tokens=16):
        super().__init__()
        self.patches = torch.nn.Conv2d(3, dim, 4, stride=4)
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.mix_tokens = torch.nn.Linear(tokens, tokens)
        self.mix_channels = torch.nn.Linear(dim, dim)

    def forward(self, x):
        x = self.patches(x).flatten(2).transpose(1, 2)
        x = x + self.mix_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.mix_channels(self.norm2(x)), x


def test_a_patch_embeddings_tokens_stay_token_major_and_outputs_keep_eagers_strides(tmp_path):
    # The convolution writes its tokens channels-last, which is token-major after the transpose:
    # the stream stays that way (no copy back to channel-major before it), and the outputs, which
    # eager returns channel-major, are restored to eager's strides.
    model = _TokenMixer().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        for got, want in zip(compiled(x), expected):
            assert_close(got, want, atol=1e-5, rtol=1e-4)
            assert got.stride() == want.stride() and not want.is_contiguous()
        scripted = kiln.compile(torch.jit.trace(model, (x,)))
        for got, want in zip(scripted(x), expected):
            assert_close(got, want, atol=1e-5, rtol=1e-4)
            assert got.stride() == want.stride()
    ir = _final_ir(tmp_path, after="assign_layout")
    tokens = [line for line in ir.splitlines() if re.search(r"= aten::(permute|transpose)", line)]
    assert tokens and " : f32[2,16,32] = " in tokens[0], ir
    assert "memory_format=0" not in ir.split(tokens[0])[0], ir


class _FeedForward(torch.nn.Module):
    """A transformer feed-forward block with products big enough for prepack_linear (64 rows of
    256 x 512 multiply-adds)."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(256, 512)
        self.down = torch.nn.Linear(512, 256, bias=False)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x))) + x


def _final_ir(dump_dir, after="plan_memory"):
    """The graph dump_dir holds as the pass `after` left it (the last one: the final IR)."""
    (name,) = [f for f in os.listdir(dump_dir) if f.endswith(f"-{after}.kir")]
    with open(os.path.join(dump_dir, name)) as f:
        return f.read()


def _compiled_ir(model, x, dump_dir):
    """The final IR of `model` under torch.compile, once its result is checked against eager
    (oneDNN sums, and computes erf, in another order than ATen: float32 rounding apart)."""
    with torch.no_grad():
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(dump_dir)})
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    return _final_ir(dump_dir)


class _InOutWeights(torch.nn.Module):
    """GPT-2's Conv1D twice: addmm(bias, x, weight) with the weight stored [in, out], not the
    [out, in] of nn.Linear."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(256, 512) * 0.05)
        self.b1 = torch.nn.Parameter(torch.randn(512))
        self.w2 = torch.nn.Parameter(torch.randn(512, 256) * 0.05)
        self.b2 = torch.nn.Parameter(torch.randn(256))

    def forward(self, x):
        h = torch.relu(torch.addmm(self.b1, x.view(-1, 256), self.w1))
        return torch.addmm(self.b2, h, self.w2).view(x.shape)


@pytest.mark.parametrize("make_model,product", [
    (_FeedForward, "aten::linear"),
    (_InOutWeights, "aten::addmm"),  # canonicalize transposes the weight, prepack_linear packs it
])
def test_large_linears_run_on_onednn_with_weights_packed_at_compile_time(make_model, product,
                                                                         tmp_path):
    model = make_model().eval()
    x = torch.randn(4, 16, 256)
    ir = _compiled_ir(model, x, tmp_path)
    with torch.no_grad():
        scripted = kiln.compile(torch.jit.script(model))
        assert_close(scripted(x), model(x), atol=1e-4, rtol=1e-4)
    assert ir.count(f"{_ONEDNN_LINEAR}(") == 2 and product not in ir, ir
    # The packed (and transposed) weights are constants, computed once.
    assert "_reorder_linear_weight" not in ir and "onednn_linear_weight" not in ir, ir
    assert "aten::t(" not in ir, ir
    ops = explained_ops(scripted, x)
    assert ops.count(_ONEDNN_LINEAR) == 2 and product not in ops, ops


class _TokenMixing(torch.nn.Module):
    """MLP-Mixer's token mixing: linears over a transposed input, which core ATen writes as a
    product and a separate bias add."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x):
        mixed = self.down(torch.nn.functional.gelu(self.up(x.transpose(1, 2))))
        return mixed.transpose(1, 2) + x


class _NewGeluMlp(torch.nn.Module):
    """GPT-2's feed-forward block, its GELU written out in the tanh form (transformers'
    NewGELUActivation)."""

    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(256, 512), torch.nn.Linear(512, 256)

    def forward(self, x):
        h = self.up(x)
        inner = math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))
        h = 0.5 * h * (1.0 + torch.tanh(inner))
        return self.down(h)


def test_a_gelu_written_out_runs_as_the_linears_post_op(tmp_path):
    ir = _compiled_ir(_NewGeluMlp().eval(), torch.randn(2, 64, 256), tmp_path)
    # recognize_gelu makes it one aten::gelu, which prepack_linear makes the first linear's post-op.
    recognized = _final_ir(tmp_path, after="recognize_gelu")
    assert 'aten::gelu(' in recognized and "aten::tanh" not in recognized, recognized
    if _OWN_ONEDNN:
        assert 'activation="gelu_tanh"' in ir, ir


class _Conv1DMlp(_NewGeluMlp):
    """The same block as transformers writes GPT-2's: each Conv1D multiplies the flattened rows
    (addmm with an [in, out] weight) and views the result back."""

    def forward(self, x):
        rows = x.shape[:-1]
        h = torch.addmm(self.up.bias, x.view(-1, 256), self.up.weight.t()).view(*rows, 512)
        inner = math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))
        h = 0.5 * h * (1.0 + torch.tanh(inner))
        return torch.addmm(self.down.bias, h.view(-1, 512), self.down.weight.t()).view(*rows, 256)


def test_a_traced_linear_on_flattened_rows_takes_its_gelu_as_post_op(tmp_path):
    model, x = _Conv1DMlp().eval(), torch.randn(2, 64, 256)
    traced = torch.jit.trace(model, (x,))
    with torch.no_grad():
        compiled = kiln.compile(traced, options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    # canonicalize makes each view -> addmm -> view one linear over the unflattened input.
    canonical = _final_ir(tmp_path, after="canonicalize")
    assert canonical.count("aten::linear(") == 2 and "aten::view" not in canonical, canonical
    if _OWN_ONEDNN:
        assert 'activation="gelu_tanh"' in _final_ir(tmp_path), _final_ir(tmp_path)
    if _OWN_ONEDNN and kiln._C.native_bf16():
        # No flattening view is left between the two for bf16_activations to count as a reader.
        compiled = kiln.compile(traced, options={"precision": "bf16"})
        with torch.no_grad():
            compiled(x)
        explained = compiled.explain(x)
        assert explained.count("multiplying in bf16, writing bf16") == 1, explained


@pytest.mark.skipif(not _OWN_ONEDNN, reason="kiln built without its own oneDNN")
@pytest.mark.parametrize("make_model", [_FeedForward, _TokenMixing])
def test_a_linears_bias_and_gelu_run_inside_its_onednn_matmul(make_model, tmp_path):
    torch.manual_seed(0)
    ir = _compiled_ir(make_model().eval(), torch.randn(2, 16, 256), tmp_path)
    # _TokenMixing's first bias is added after its product: folded in, or the gelu stays out.
    assert ir.count("kiln::onednn_linear(") == 2 and ir.count('activation="gelu"') == 1, ir
    assert "aten::gelu" not in ir, ir


def test_training_graphs_multiply_weights_unpacked(tmp_path):
    """A training graph's weights are inputs, different at every step: nothing is packed, and its
    products (the forward's linears, the backward's input gradients) run on kiln's oneDNN matmul
    over the weights as they lie; gradients as eager's."""
    torch.manual_seed(0)
    model = _FeedForward().train()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 16, 256, requires_grad=True)
    compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
    compiled(x).sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    reference(x_ref).sum().backward()
    assert_close(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
    for got, want in zip(model.parameters(), reference.parameters()):
        assert_close(got.grad, want.grad, atol=1e-4, rtol=1e-4)
    ir = "".join(open(tmp_path / f).read() for f in os.listdir(tmp_path) if f.endswith(".kir"))
    assert "mkldnn::" not in ir and "kiln::onednn_linear" not in ir
    if _OWN_ONEDNN:
        assert "kiln::onednn_matmul" in ir, ir


def test_frozen_convolutions_run_on_onednn_with_packed_weights(tmp_path):
    model = _FeatureMaps().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = model(x)
        compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), expected, atol=1e-5, rtol=1e-4)
    ir = _final_ir(tmp_path)
    assert "aten::conv2d" not in ir, ir
    assert "aten::to_mkldnn" not in ir and "aten::mkldnn_reorder_conv2d_weight" not in ir, ir
    if _OWN_ONEDNN:
        # conv1's relu runs inside it; conv2's residual (the max pool's output) and the relu
        # after it too: kiln's primitive reads the residual where it lies.
        convs = [line for line in ir.splitlines() if "= kiln::onednn_conv2d(" in line]
        assert len(convs) == 2, ir
        assert sum("other=None" not in line for line in convs) == 1, ir
        assert all('activation="relu"' in line for line in convs), ir
        assert "aten::add" not in ir and "kiln::onednn_conv2d_weight" not in ir, ir
    else:
        # conv1's relu runs inside it. conv2's residual is the max pool's output, which ATen's
        # op cannot be written over: the add and the relu after it run as a kernel.
        assert ir.count("= mkldnn::_convolution_pointwise(") == 2, ir
        assert ir.count("= mkldnn::_convolution_pointwise.binary(") == 0, ir
        assert ' attr="relu"' in ir, ir


class _SplitBranches(torch.nn.Module):
    """SKNet's selective kernel: the channels split between two convolutions (each reads a
    channel slice of a channels-last tensor), stacked, summed and weighted."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.narrow = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.wide = torch.nn.Conv2d(8, 16, 3, padding=2, dilation=2)

    def forward(self, x):
        a, b = torch.relu(self.stem(x)).split(8, dim=1)
        branches = torch.stack([self.narrow(a), self.wide(b)], dim=1)
        weights = branches.sum(1).mean((2, 3), keepdim=True).sigmoid()
        return (branches * weights.unsqueeze(1)).sum(1)


@pytest.mark.skipif(not _OWN_ONEDNN, reason="kiln built without its own oneDNN")
def test_convolutions_of_channel_slices_run_on_kilns_primitive():
    model = _SplitBranches().eval()
    traced = traced_after_checking_both_entry_points(model, torch.randn(2, 3, 12, 12))
    ops = explained_ops(traced, torch.randn(2, 3, 12, 12))
    assert ops.count("kiln::onednn_conv2d") == 3 and "aten::_convolution" not in ops, ops


def test_a_traced_number_is_imported_as_the_scalar_ops_argument(tmp_path):
    # Tracing records `x * 0.5` as aten::mul(x, %c), %c a 0-dim tensor constant holding a wrapped
    # number; kiln imports it as aten::mul.Scalar {other=0.5}, the same computation, so its passes
    # and kernels see the number. An integer tensor times 0.5 is float32, as in eager (a constant
    # buffer would lose the wrapped number's rule and make it float64).
    class Numbers(torch.nn.Module):
        def forward(self, x, i):
            return (x * 0.5 + 1.0) / 3.0 - 2, i * 0.5, 1.5 - i

    x, i = torch.randn(4, 8), torch.arange(6)
    module = torch.jit.trace(Numbers(), (x, i))
    with torch.no_grad():
        got = kiln.compile(module, options={"dump_dir": str(tmp_path)})(x, i)
        want = module(x, i)
    assert torch.equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype == torch.float32 and torch.equal(got[1], want[1])
    assert got[2].dtype == want[2].dtype == torch.float32 and torch.equal(got[2], want[2])
    captured = _final_ir(tmp_path, after="capture")
    for op in ("aten::mul.Scalar", "aten::add.Scalar", "aten::div.Scalar", "aten::sub.Scalar",
               "aten::rsub.Scalar"):
        assert op in captured, captured
