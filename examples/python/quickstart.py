"""kiln under torch.compile: compile a model, run it, check it against eager, see what kiln did.

    .venv/bin/python examples/python/quickstart.py
"""
import torch
from torch import nn

import kiln  # only for kiln.stats(): backend="kiln" is found without an import

model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 10)).eval()
x = torch.randn(8, 64)

compiled = torch.compile(model, backend="kiln", options={"strict": True})
with torch.no_grad():
    y = compiled(x)

stats = kiln.stats()
print(f"graphs {stats['graphs']}, regions {stats['regions']}, kernels {stats['kernels']}, "
      f"ops left to eager {stats['eager_ops']}")

with torch.no_grad():
    expected = model(x)
torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-5)
assert stats["kernels"] > 0, "kiln generated no kernel"
print("matches eager")
