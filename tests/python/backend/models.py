"""Small models the Python tests compile (random weights, built from code)."""

import json

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, width=32, depth=3, classes=10):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.body = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return torch.log_softmax(self.head(self.norm(self.body(x) + x)), dim=-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


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


def encoder_layer():
    return nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                      batch_first=True)


def assert_close(actual, expected, atol=1e-5, rtol=1e-4):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def traced_after_checking_both_entry_points(model, x, atol=1e-5, rtol=1e-4):
    """`model` compiled with kiln on the TorchScript path (traced on `x`), after that and
    torch.compile's are checked against eager on `x`."""
    import kiln  # the tests import models before kiln's build is known to be importable

    traced = kiln.compile(torch.jit.trace(model, (x,)))
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        for compiled in (torch.compile(model, backend="kiln"), traced):
            assert_close(compiled(x), expected, atol=atol, rtol=rtol)
    return traced


def randomize_batch_norms(model):
    # Fresh batch norms are the identity; folding them would test nothing.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                if m.affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
    return model


def explained_ops(compiled, x):
    """The ops of `compiled`'s plan for `x`, in plan order (kiln's explain)."""
    return [e["op"] for e in json.loads(compiled.explain(x))["entries"]]
