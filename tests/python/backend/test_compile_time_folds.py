"""Values kiln computes once, at compile time, from the weights and the sizes alone: masks a
model builds from its sizes, relative position biases gathered from a table of weights, and
convolution branches of one input merged into one convolution (fold_constants,
merge_conv_branches). Each on both entry points, against eager."""

import json

import pytest
import torch

import kiln
from models import explained_ops, randomize_batch_norms, traced_after_checking_both_entry_points


class _MasksOfSizes(torch.nn.Module):
    """Masks built from sizes alone: Swin's shifted-window mask in small (zeros of the input's
    type written through slices, compared pairwise) and a causal one (full, triu)."""

    def forward(self, x):
        m = x.new_zeros((8, 8))
        m[:4, :4] = 1.0
        m[4:, :2] = 2.0
        m = m.view(64)
        pairs = (m.unsqueeze(0) - m.unsqueeze(1)).ne(0)
        bias = torch.zeros_like(pairs, dtype=x.dtype).masked_fill(pairs, -100.0)
        causal = torch.full((64, 64), float("-inf")).triu(1)
        return torch.softmax(x + bias + causal, -1)


def test_masks_built_from_sizes_alone_are_computed_at_compile_time():
    model, x = _MasksOfSizes(), torch.randn(2, 64, 64)
    before = kiln.stats()["extern_steps"]
    traced = traced_after_checking_both_entry_points(model, x)
    # Both entry points: every step left is a generated kernel (the add and the softmax).
    assert kiln.stats()["extern_steps"] == before
    assert {e["where"] for e in json.loads(traced.explain(x))["entries"]} == {"fused kernel"}


class _RelativePositionBias(torch.nn.Module):
    """Window attention's bias: a table of weights indexed by a constant buffer, 1.2 MB once
    gathered (GC-ViT's 14x14 windows, 8 heads)."""

    def __init__(self, window=14, heads=8):
        super().__init__()
        span = 2 * window - 1
        self.table = torch.nn.Parameter(torch.randn(span * span, heads))
        grid = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        coords = torch.stack(grid).flatten(1)
        relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", (relative[..., 0] * span + relative[..., 1]).flatten())

    def forward(self, scores):
        n = scores.shape[-1]
        bias = self.table[self.index].view(n, n, -1).permute(2, 0, 1)
        return torch.softmax(scores + bias, -1)


def test_a_relative_position_bias_is_gathered_at_compile_time():
    model, x = _RelativePositionBias().eval(), torch.randn(1, 8, 196, 196)
    before = kiln.stats()["extern_steps"]
    traced = traced_after_checking_both_entry_points(model, x)
    assert kiln.stats()["extern_steps"] == before
    assert "aten::index.Tensor" not in explained_ops(traced, x)


def _conv_bn(channels, kernel, stride, groups):
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=groups, bias=False),
        torch.nn.BatchNorm2d(channels))


class _ReparameterizableBlock(torch.nn.Module):
    """MobileOne's training-time block (RepVGG's with one kxk branch): an identity batch norm, a
    1x1 branch and three 3x3 branches of one input, summed one add at a time."""

    def __init__(self, channels=16, stride=1, groups=1):
        super().__init__()
        self.identity = torch.nn.BatchNorm2d(channels) if stride == 1 else None
        self.scale = _conv_bn(channels, 1, stride, groups)
        self.kxk = torch.nn.ModuleList(_conv_bn(channels, 3, stride, groups) for _ in range(3))

    def forward(self, x):
        out = self.identity(x) if self.identity is not None else 0
        out = out + self.scale(x)
        for branch in self.kxk:
            out = out + branch(x)
        return torch.relu(out)


@pytest.mark.parametrize("stride,groups", [(1, 1), (2, 1), (1, 16)])
def test_convolution_branches_of_one_input_merge_into_one(stride, groups):
    torch.manual_seed(0)
    model = randomize_batch_norms(_ReparameterizableBlock(stride=stride, groups=groups).eval())
    x = torch.randn(2, 16, 14, 14)
    traced = traced_after_checking_both_entry_points(model, x)
    convolutions = [op for op in explained_ops(traced, x)
                    if "conv" in op and not op.endswith("_weight")]
    assert len(convolutions) == 1, convolutions
