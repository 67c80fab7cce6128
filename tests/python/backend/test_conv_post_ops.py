"""Convolutions with a residual add and an activation after it: prepack_conv fuses into oneDNN's
binary convolution only what oneDNN accepts there (relu), and the rest runs as kiln's own
kernels. A hardtanh after the add was once handed to oneDNN, which rejects it when it runs."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kiln

ACTIVATIONS = {
    "relu": F.relu,
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 1.5),
    "relu6": F.relu6,
    "gelu": F.gelu,
    "silu": F.silu,
}


class GroupedResidual(nn.Module):
    """A stem, then a grouped convolution, batch norm, the residual add and an activation."""

    def __init__(self, groups: int, activation: str):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.conv = nn.Conv2d(16, 16, 3, padding=1, groups=groups, bias=False)
        self.norm = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)
        self.activation = ACTIVATIONS[activation]
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.5, 0.5)
            self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.relu(self.stem(x))
        x = self.activation(self.norm(self.conv(x)) + x)
        return self.head(x.mean((2, 3)))


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("groups", [1, 4])
def test_an_activation_after_a_residual_add_matches_eager_under_torch_compile(groups, activation):
    model = GroupedResidual(groups, activation).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend="kiln", options={"strict": True})(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("activation", ["hardtanh", "relu"])
def test_an_activation_after_a_residual_add_matches_eager_on_the_torchscript_path(activation):
    model = GroupedResidual(4, activation).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        want = model(x)
        got = kiln.compile(torch.jit.trace(model, x), options={"strict": True})(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
