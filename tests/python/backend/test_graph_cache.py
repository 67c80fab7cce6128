"""Optimized graphs kept in the disk cache (docs/disk-cache.md, backend/api/graph_cache.h): a
second process takes each region's graph after the graph passes from the cache instead of
running them, with bit-identical results; and two checkpoints of one architecture, whose graph IR
is the same, never get each other's folded or packed weights."""

import json

from child import run_child

# Two checkpoints of one convolutional net (batch norms to fold, convolutions to pack), each
# compiled on both entry points and checked against its own eager results.
_CODE = """
import json, torch, kiln
from torch import nn
def net(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    for m in model.modules():  # batch-norm statistics that differ per checkpoint
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1); m.running_var.uniform_(0.5, 2)
    return model.eval()
x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(7))
outs = {}
with torch.no_grad():
    for seed in (0, 1):
        model = net(seed)
        expected = model(x)
        for entry in ("torchscript", "torch.compile"):
            compiled = (kiln.compile(torch.jit.trace(model, (x,))) if entry == "torchscript"
                        else torch.compile(model, backend="kiln"))
            out = compiled(x)
            torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
            outs[f"{entry}/{seed}"] = out.flatten().tolist()
assert outs["torchscript/0"] != outs["torchscript/1"]  # the checkpoints differ
print(json.dumps({"loaded": kiln.stats()["graphs_loaded"], "outs": outs}))
"""


def test_a_second_process_loads_optimized_graphs_and_checkpoints_stay_apart(tmp_path):
    env = {"KILN_CACHE_DIR": str(tmp_path / "cache")}
    first = json.loads(run_child(_CODE, env=env).splitlines()[-1])
    assert first["loaded"] == 0, first
    second = json.loads(run_child(_CODE, env=env).splitlines()[-1])
    assert second["loaded"] >= 4, second  # each checkpoint on each entry point
    assert second["outs"] == first["outs"]  # bit for bit, each with its own weights
