"""nn.TransformerEncoderLayer's and nn.MultiheadAttention's inference fast paths are fused ATen
ops (aten::_transformer_encoder_layer_fwd, in TorchScript and under dynamo alike;
aten::_native_multi_head_attention, in TorchScript). kiln expands them into their parts (linears, attention, layer norms) so
that it compiles them; with a mask, or anything else it does not expand, the op runs whole
through ATen. Either way: eager's results."""

import json

import pytest
import torch
from torch import nn

import kiln
from models import assert_close

FUSED_OP = "aten::_transformer_encoder_layer_fwd"


def _layer(activation="relu", norm_first=False, width=32, heads=4):
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, activation=activation,
                                      batch_first=True, norm_first=norm_first).eval()


def _ops(explained):
    return [entry["op"] for entry in explained["entries"]]


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_torchscript_layer_compiles_as_its_parts(activation, norm_first):
    layer = _layer(activation, norm_first)
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        scripted = torch.jit.script(layer)
        compiled = kiln.compile(scripted, options={"strict": True})
        assert_close(compiled(x), layer(x))
        ops = _ops(json.loads(compiled.explain(x)))
    assert FUSED_OP not in ops, ops
    assert "aten::scaled_dot_product_attention" in ops and ops.count("aten::layer_norm") == 2, ops


def test_a_stack_of_layers_expands_every_layer():
    encoder = nn.TransformerEncoder(_layer(), num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(3, 5, 32)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.script(encoder))
        assert_close(compiled(x), encoder(x))
        ops = _ops(json.loads(compiled.explain(x)))
    assert FUSED_OP not in ops and ops.count("aten::scaled_dot_product_attention") == 2, ops


def test_with_a_padding_mask_the_fused_op_runs_whole():
    layer = _layer()
    x = torch.randn(2, 6, 32)
    mask = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.script(layer))
        assert_close(compiled(x, None, mask), layer(x, src_key_padding_mask=mask))
        ops = _ops(json.loads(compiled.explain(x, None, mask)))
    assert FUSED_OP in ops, ops


def test_torch_compile_expands_the_layer_too(tmp_path):
    layer = _layer("gelu")
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        compiled = torch.compile(layer, backend="kiln", options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), layer(x))
    captured = "".join(p.read_text() for p in tmp_path.glob("*-capture.kir"))
    assert "aten::scaled_dot_product_attention" in captured and FUSED_OP not in captured, captured


ATTENTION_OP = "aten::_native_multi_head_attention"


class _SelfAttention(nn.Module):
    """torchvision's ViT block calls its attention this way."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        y, _ = self.attention(x, x, x, need_weights=False)
        return (y + x).relu()


class _CrossAttention(_SelfAttention):
    """The fast path's op with a key that is not the query (MultiheadAttention itself takes
    its slow path there)."""

    def forward(self, x):
        a = self.attention
        y, _ = torch._native_multi_head_attention(
            x, x.flip(1), x.flip(1), 32, 4, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
            a.out_proj.bias, None, False)
        return y


class _ReadsTheWeights(_SelfAttention):
    def forward(self, x):
        y, weights = self.attention(x, x, x, need_weights=False)
        if weights is None:
            return y
        return y + 1


def test_traced_self_attention_compiles_as_its_parts():
    model = _SelfAttention().eval()
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.trace(model, x), options={"strict": True})
        assert_close(compiled(x), model(x))
        ops = _ops(json.loads(compiled.explain(x)))
    assert ATTENTION_OP not in ops and "aten::scaled_dot_product_attention" in ops, ops


class _SelfAttentionStack(nn.Module):
    """Five of torchvision's ViT attention blocks: more than the specialization's folds once took
    rounds (each block's checks read the sizes of the block before)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(_SelfAttention() for _ in range(5))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_scripted_self_attention_compiles_as_its_parts_in_one_region():
    """Scripted, MultiheadAttention checks its operands before it takes the fused op (`query is
    not key`, each one's device and dtype, the sizes of each block's input): the specialization
    folds them all, so every block's op is expanded into one region."""
    model = _SelfAttentionStack().eval()
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.script(model), options={"strict": True})
        assert_close(compiled(x), model(x))
        explained = json.loads(compiled.explain(x))
    ops = _ops(explained)
    assert ATTENTION_OP not in ops and "aten::scaled_dot_product_attention" in ops, ops
    assert explained["regions"] == 1 and explained["interpreter"] == 0, explained["entries"]


@pytest.mark.parametrize("model", [_CrossAttention, _ReadsTheWeights])
def test_cross_attention_or_weights_read_keep_the_op_whole(model):
    """Weights not asked for are None in eager; a graph that looks at them gets them from the
    fused op itself."""
    model = model().eval()
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.script(model), options={"strict": True})
        assert_close(compiled(x), model(x))
        ops = _ops(json.loads(compiled.explain(x)))
    assert ATTENTION_OP in ops, ops


class _MaskedAttention(nn.Module):
    """scaled_dot_product_attention with a float mask per head ([heads, L, S], as TinyViT's
    attention biases), which takes ATen's math path: dynamo's graph has it written out, with
    any(s != -inf) finding the rows the mask takes out entirely (zeros in eager)."""

    def forward(self, q, k, v, mask):
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_rows_a_float_mask_takes_out_entirely_are_zeros_as_in_eager(tmp_path):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    mask = torch.randn(4, 16, 16)
    mask[:, 3] = float("-inf")  # row 3 of every head: nothing to attend to
    mask[1, 7, ::2] = float("-inf")
    model = _MaskedAttention()
    torch._dynamo.reset()
    options = {"strict": True, "dump_dir": str(tmp_path)}
    with torch.no_grad():
        expected = model(q, k, v, mask)
        got = torch.compile(model, backend="kiln", options=options)(q, k, v, mask)
    assert_close(got, expected)
    assert torch.equal(got[:, :, 3], torch.zeros_like(got[:, :, 3]))
    planned = [p.read_text() for p in tmp_path.glob("*plan_memory.kir")]
    assert planned and "aten::amax" in planned[0]
    # The rows' test is a reduction in a kernel, not ATen's any and logical_nots.
    assert "aten::any" not in planned[0] and "aten::logical_not" not in planned[0]
