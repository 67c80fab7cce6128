"""The kernel cache: a region compiled after another one that has the same kernels (the same
architecture with other weights, the same layers at another input size) takes them from the code
compiled before instead of compiling them again, and still computes with its own inputs."""

import os
import subprocess
import sys

import torch

import kiln
from models import assert_close


def _block():
    # A tanh, not a GELU: oneDNN's linear takes a GELU inside, and the block would keep one kernel.
    return torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.Tanh(), torch.nn.Linear(96, 48),
                               torch.nn.LayerNorm(48)).eval()


def test_a_second_model_of_the_same_shape_reuses_the_first_ones_kernels():
    torch.manual_seed(0)
    first, second = _block(), _block()
    x = torch.randn(6, 48)
    with torch.no_grad():
        compiled_first = torch.compile(first, backend="kiln")
        assert_close(compiled_first(x), first(x))
        kiln.reset_stats()
        # Dynamo hands this module the graph it made for the first (weights are its inputs), so
        # the region compiles again for the new weights; its kernels are the ones it had.
        compiled_second = torch.compile(second, backend="kiln")
        # The second model's weights, not the first's: the kernels take them as inputs.
        assert_close(compiled_second(x), second(x))
    stats = kiln.stats()
    assert stats["specializations"] == 1 and stats["kernels"] >= 2, stats
    assert stats["reused_kernels"] == stats["kernels"], stats
    del compiled_first


class _DecodingStep(torch.nn.Module):
    """A decoding step: the new token's layer norm and MLP keep their shape while the attention
    over the cache grows by one row per step."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(48)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(),
                                       torch.nn.Linear(96, 48))

    def forward(self, token, cache):
        h = self.norm(token)
        attention = torch.softmax(h @ cache.transpose(-1, -2) * 0.125, dim=-1) @ cache
        return self.mlp(h + attention).sigmoid()


def test_a_new_size_reuses_the_kernels_that_do_not_depend_on_it():
    torch.manual_seed(1)
    model = _DecodingStep().eval()
    token = torch.randn(2, 1, 48)
    compiled = torch.compile(model, backend="kiln", dynamic=False)
    with torch.no_grad():
        cache = torch.randn(2, 5, 48)
        assert_close(compiled(token, cache), model(token, cache))
        kiln.reset_stats()
        cache = torch.randn(2, 6, 48)
        assert_close(compiled(token, cache), model(token, cache))
    stats = kiln.stats()
    assert stats["specializations"] == 1, stats
    # The layer norm and the MLP's kernels are the same; the softmax over the cache is new.
    assert 1 <= stats["reused_kernels"] < stats["kernels"], stats


def test_kiln_disable_kernel_cache_compiles_every_kernel():
    """KILN_DISABLE=kernel_cache (read once per process, so in a child process): the second
    model compiles its kernels again, and computes the same."""
    code = """
import torch, kiln
torch.manual_seed(0)
blocks = [torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.Tanh(),
                              torch.nn.LayerNorm(96)).eval() for _ in range(2)]
x = torch.randn(6, 48)
with torch.no_grad():
    compiled = [torch.compile(b, backend="kiln") for b in blocks]
    for c, b in zip(compiled, blocks):
        torch.testing.assert_close(c(x), b(x), rtol=1e-5, atol=1e-5)
stats = kiln.stats()
assert stats["specializations"] == 2 and stats["kernels"] >= 2, stats
print("reused", stats["reused_kernels"])
"""
    reused = {}
    for disable in ("", "kernel_cache"):
        env = {**os.environ, "KILN_DISABLE": disable, "KILN_LOG": "error"}
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        reused[disable] = int(result.stdout.split()[-1])
    assert reused[""] >= 1 and reused["kernel_cache"] == 0, reused
