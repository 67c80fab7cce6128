"""A squeeze-excitation block's activation and mean over a channels-last tensor: one kernel that
reduces across its rows (the channels), with channel counts that leave rows after the full
vectors (vector widths down to 4 lanes, then single rows), and the activation stored during the
mean's own walk. Checked against eager."""

import pytest
import torch

import kiln


class SqueezeExcitation(torch.nn.Module):
    def forward(self, x):
        y = torch.nn.functional.silu(x)
        s = y.mean((2, 3), keepdim=True)
        return y, s, y * torch.sigmoid(s), x - x.mean((2, 3), keepdim=True)


@pytest.mark.parametrize("channels", [8, 24, 40, 72, 136, 144, 4 * 16 + 4 + 1])
def test_activation_and_mean_across_channels_match_eager(channels):
    x = torch.randn(2, channels, 7, 9).to(memory_format=torch.channels_last)
    model = SqueezeExcitation()
    compiled = torch.compile(model, backend="kiln", options={"strict": True})
    with torch.no_grad():
        expected, actual = model(x), compiled(x)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    assert kiln.stats()["kernels"] > 0
