"""var, std, var_mean and std_mean run in kiln's kernels (passes/kernel/lower_ops.cpp:
Lowering::variance), on both entry points, and match eager."""

import warnings

import pytest
import torch

import kiln
from models import assert_close


class Statistics(torch.nn.Module):
    """Every overload and argument form the two paths see."""

    def forward(self, x):
        var, mean = torch.var_mean(x, -1, correction=0, keepdim=True)
        std, mean_0 = torch.std_mean(x, 0)
        return (var, mean, std, mean_0, x.var(-1), x.std(), x.var(1, keepdim=True),
                x.var([0, 2], correction=2), x.std(1, correction=0.5), x.std(unbiased=False),
                x.var(-1, correction=-1))


def _tolerances(dtype):
    # float32 sums of 7 values near 10 whose variance is ~9 (both sides round the mean and the
    # squares); bfloat16 results are within an ulp of eager's (kiln keeps float32 throughout).
    return {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12),
            torch.bfloat16: (0.0, 2 ** -7)}[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("path", ["torch.compile", "torchscript"])
def test_statistics_match_eager(path, dtype):
    model = Statistics()
    x = (torch.randn(3, 5, 7) * 3 + 10).to(dtype)
    if path == "torch.compile":
        compiled = torch.compile(model, backend="kiln", dynamic=False, options={"strict": "true"})
    else:
        compiled = kiln.compile(torch.jit.trace(model, x))
    kiln.reset_stats()
    with torch.no_grad():
        actual, expected = compiled(x), model(x)
    atol, rtol = _tolerances(dtype)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        assert_close(a, e, atol=atol, rtol=rtol)
    stats = kiln.stats()
    assert stats["kernels"] >= 1
    # torch.compile splits var_mean and std_mean into var and mean: nothing runs through ATen.
    # TorchScript keeps them whole (two outputs), each one ATen call.
    assert stats["extern_steps"] == (0 if path == "torch.compile" else 2)


def test_a_large_offset_costs_no_accuracy():
    """Values 1e4 apart from their mean by ~1: the one pass shifts by each row's first values."""
    model = Statistics()
    x = torch.randn(64, 33, 257) + 1e4
    compiled = torch.compile(model, backend="kiln", dynamic=False)
    with torch.no_grad():
        actual, expected = compiled(x), model(x.double())
    for a, e in zip(actual, expected):
        # float32 carries ~1e-3 of absolute error in a value near 1e4; the variance of values
        # 1e4 +- 3, computed from float32 inputs, is as exact as those inputs in float64.
        torch.testing.assert_close(a.double(), e, atol=2e-3, rtol=1e-3)


def test_too_few_values_and_non_finite_rows_give_eagers_nan_and_inf():
    def f(x):
        return x.var(1), x.std(1, correction=3), x[:, :1].var(1), x.var(0, correction=0)

    x = torch.randn(4, 3)
    x[1, 2] = float("inf")
    x[2, 0] = float("nan")
    compiled = torch.compile(f, backend="kiln", dynamic=False)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ATen's: "degrees of freedom is <= 0"
        actual, expected = compiled(x), f(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, equal_nan=True)
    assert actual[0][1].isnan() and actual[1][0].isinf() and actual[2].isnan().all()


def test_training_gradients_match_eager():
    def f(x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)

    x = torch.randn(8, 32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled = torch.compile(f, backend="kiln", dynamic=False)
    weights = torch.randn(8, 32)
    (compiled(x) * weights).sum().backward()
    (f(x_ref) * weights).sum().backward()
    assert_close(x.grad, x_ref.grad, atol=1e-4, rtol=1e-4)
