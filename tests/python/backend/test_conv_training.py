"""Training convolutional models under torch.compile: gradients match eager, and the backward
graph compiles in one region (convolution_backward leaves grad_bias, or grad_input for the first
convolution, uncomputed: an unread None output, which no longer cuts the graph)."""

import pytest
import torch
from torch import nn

import kiln
from models import assert_close


class BiasFreeNet(nn.Module):
    """ResNet's pattern: convolutions without bias, each followed by a batch norm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)) + x)
        return self.fc(x.mean(dim=(2, 3)))


class ConvNeXtStage(nn.Module):
    """ConvNeXt's stem, blocks and downsampling: layer norms over channels through permutes make
    the convolutions' inputs channels last, and so their outputs and input gradients (on the
    CPU); permuted back to [N, H, W, C] those are contiguous, and the linears' backward views
    them as matrices."""

    def __init__(self, width=16):
        super().__init__()
        self.stem, self.stem_norm = nn.Conv2d(3, width, 2, stride=2), nn.LayerNorm(width)
        self.depthwise = nn.Conv2d(width, width, 7, padding=3, groups=width)
        self.norm = nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.scale = nn.Parameter(torch.full((width, 1, 1), 0.5))
        self.down_norm = nn.LayerNorm(width)
        self.downsample = nn.Conv2d(width, 2 * width, 2, stride=2)

    def forward(self, x):
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        for _ in range(2):
            y = self.depthwise(x).permute(0, 2, 3, 1)
            y = self.down(nn.functional.gelu(self.up(self.norm(y))))
            x = x + self.scale * y.permute(0, 3, 1, 2)
        x = self.down_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.downsample(x).mean(dim=(2, 3))


def _train_step_matches_eager(make_model, shape):
    model, reference = make_model().train(), make_model().train()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(shape)
    kiln.reset_stats()
    torch.compile(model, backend="kiln")(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-3), name
    return kiln.stats()


def test_a_bias_free_cnn_trains_in_one_region_per_graph():
    stats = _train_step_matches_eager(BiasFreeNet, (4, 3, 12, 12))
    assert stats["graphs"] == 2 and stats["regions"] == 2 and stats["eager_ops"] == 0, stats
    assert stats["fallbacks"] == 0, stats


@pytest.mark.parametrize("training", [False, True])
def test_convnext_stages_compile_without_falling_back(training):
    """A `view` after the permute only works on a channels-last convolution output, which the
    CPU kernel returns and the meta kernel kiln infers shapes with does not."""
    if training:
        stats = _train_step_matches_eager(ConvNeXtStage, (2, 3, 16, 16))
    else:
        model = ConvNeXtStage().eval()
        x = torch.randn(2, 3, 16, 16)
        kiln.reset_stats()
        with torch.no_grad():
            assert_close(torch.compile(model, backend="kiln")(x), model(x))
        stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["graph_fallbacks"] == 0, stats
    assert stats["eager_ops"] == 0, stats
