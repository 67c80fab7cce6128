"""Float -> integer casts in kiln's kernels give what eager gives on this CPU, also where C++ and
LLVM leave the conversion undefined (NaN, infinities, values out of the integer's range)."""

import json

import pytest
import torch

import kiln

SPECIALS = [float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 1e20, 300.7, -300.7, -1.5,
            70000.0, 4294967596.0, -2147483948.0, 2147483520.0, 9.3e18, 0.5, -0.0]


class Casts(torch.nn.Module):
    def forward(self, x):
        y = x * 1.0  # an elementwise producer, so that every cast is fused into one kernel
        return (y.to(torch.int64), y.to(torch.int32), y.to(torch.int16), y.to(torch.int8),
                y.to(torch.uint8), y.to(torch.bool))


def _inputs(dtype):
    # The specials, then enough ordinary values that every vector width has a tail.
    return torch.cat([torch.tensor(SPECIALS, dtype=torch.float64),
                      torch.linspace(-400, 400, 37, dtype=torch.float64)]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("path", ["torch.compile", "torchscript"])
def test_float_to_integer_casts_match_eager(dtype, path):
    model = Casts().eval()
    x = _inputs(dtype)
    if path == "torch.compile":
        compiled = torch.compile(model, backend="kiln", dynamic=False, options={"strict": True})
    else:
        compiled = kiln.compile(torch.jit.trace(model, (x,)), options={"strict": True})
        entries = json.loads(compiled.explain(x))["entries"]
        assert not [e for e in entries if e["where"] != "fused kernel"], entries
    with torch.no_grad():
        got, want = compiled(x), model(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert torch.equal(g, w), (w.dtype, x[(g != w)].tolist(), g[g != w].tolist(),
                                   w[g != w].tolist())
