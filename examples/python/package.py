"""A compiled model in one file: save it with its machine code, load it in a fresh process, which
runs it without generating code.

    .venv/bin/python examples/python/package.py
"""
import subprocess
import sys

import torch
from torch import nn

import kiln

model = nn.Sequential(nn.Linear(64, 256), nn.LayerNorm(256), nn.SiLU(), nn.Linear(256, 10)).eval()
x = torch.randn(8, 64)
torch.save((model(x).detach(), x), "expected.pt")

compiled = torch.compile(model, backend="kiln")
kiln.save(compiled, "model.kiln", example_inputs=(x,))  # traced, compiled, code included

LOAD = """
import torch, kiln
model = kiln.load("model.kiln")   # compiles its input signatures from the package's code
expected, x = torch.load("expected.pt")
torch.testing.assert_close(model(x), expected, rtol=1e-4, atol=1e-5)
print("code modules compiled at load:", kiln.stats()["modules_compiled"])
"""
out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True)
print(out.stdout.strip())
assert out.stdout.strip().endswith(": 0"), out.stdout
print("matches eager")
