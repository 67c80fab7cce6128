"""hardswish, hardsigmoid, leaky_relu, sign, maximum and minimum run in kiln's kernels on both entry
points (TorchScript graphs keep hardswish and hardsigmoid whole; torch.compile decomposes them)
and match eager."""

import json

import pytest
import torch
import torch.nn.functional as F

import kiln


class Block(torch.nn.Module):
    """A MobileNetV3 block (hardswish, squeeze-excite with hardsigmoid) and the others."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.squeeze = torch.nn.Conv2d(8, 4, 1)
        self.excite = torch.nn.Conv2d(4, 8, 1)

    def forward(self, x, y):
        h = F.hardswish(self.conv(x))
        s = F.hardsigmoid(self.excite(F.relu(self.squeeze(h.mean((2, 3), keepdim=True)))))
        z = h * s
        return (z, F.leaky_relu(z - y, 0.1), torch.sign(z - 0.5), torch.maximum(z, y),
                torch.minimum(z, y * 2))


def _extern_ops(compiled, *inputs) -> list[str]:
    """The ops of a kiln.compile'd TorchScript module that run through ATen."""
    return [e["op"] for e in json.loads(compiled.explain(*inputs))["entries"]
            if e["where"] == "extern ATen"]


@pytest.mark.parametrize("path", ["torch.compile", "torchscript"])
def test_activations_match_eager_and_fuse(path):
    model = Block().eval()
    x, y = torch.randn(2, 8, 12, 12) * 4, torch.randn(2, 8, 12, 12)
    y[0, 0, 0, :3] = torch.tensor([float("nan"), -0.0, float("inf")])  # NaN through maximum
    kiln.reset_stats()
    with torch.no_grad():
        if path == "torch.compile":
            compiled = torch.compile(model, backend="kiln", dynamic=False,
                                     options={"strict": "true"})
        else:
            compiled = kiln.compile(torch.jit.trace(model, (x, y)))
        actual, expected = compiled(x, y), model(x, y)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5, equal_nan=True)
    if path == "torch.compile":
        # The 3x3 convolution, and a view before and after each of the gate's two one-pixel
        # convolutions, which are linears in kiln's kernels (conv_as_linear).
        assert kiln.stats()["extern_steps"] == 5
    else:
        # The convolutions run through ATen (oneDNN); none of these ops does.
        extern = _extern_ops(compiled, x, y)
        assert not {"aten::hardswish", "aten::hardsigmoid", "aten::leaky_relu", "aten::sign",
                    "aten::maximum", "aten::minimum"} & set(extern), extern


def test_integer_sign_and_maximum_match_eager():
    def f(a, b):
        return torch.sign(a - b), torch.maximum(a, b), torch.minimum(a, b * 2)

    a, b = torch.randint(-5, 5, (64,)), torch.randint(-5, 5, (64,))
    compiled = torch.compile(f, backend="kiln", dynamic=False)
    kiln.reset_stats()
    for actual, expected in zip(compiled(a, b), f(a, b)):
        assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    assert kiln.stats()["extern_steps"] == 0


def _smooth_activations(x):
    # softplus and mish reach kiln as log1p(exp(x)) (torch.compile) or whole (TorchScript);
    # elu, selu and celu as aten::elu on both paths.
    return (F.softplus(x), F.mish(x), F.elu(x), F.selu(x), F.celu(x, 0.5), torch.log1p(x.abs()),
            torch.expm1(x), F.softplus(x, beta=2, threshold=3))


@pytest.mark.parametrize("path", ["torch.compile", "torchscript"])
def test_log1p_expm1_and_elus_match_eager(path):
    x = torch.cat([torch.randn(1000) * 4, torch.tensor([1e-9, -1e-7, 30.0, -30.0, -0.0])])
    with torch.no_grad():
        if path == "torch.compile":
            compiled = torch.compile(_smooth_activations, backend="kiln", dynamic=False,
                                     options={"strict": "true"})
        else:
            compiled = kiln.compile(torch.jit.trace(_TracedSmooth(), x))
        kiln.reset_stats()
        actual = compiled(x)
    for a, e in zip(actual, _smooth_activations(x)):
        # A few float32 ulps of each result (kiln's exp and log are within 1 ulp).
        torch.testing.assert_close(a, e, atol=1e-6, rtol=4e-6)
    if path == "torch.compile":
        assert kiln.stats()["extern_steps"] == 0
    else:
        extern = _extern_ops(compiled, x)
        assert not extern, extern


class _TracedSmooth(torch.nn.Module):
    def forward(self, x):
        return _smooth_activations(x)
