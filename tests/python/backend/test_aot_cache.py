"""A warm torch.compile start without AOTAutograd (kiln/_aot_cache.py, docs/disk-cache.md): a
second process compiles the graph AOTAutograd made in the first (partitioned as the first
process partitioned it: kiln/_partition_cache.py), with the same results and
another checkpoint's weights; graphs whose AOTAutograd runtime does work (a mutated input, an
output aliasing an input), training graphs and symbolic shapes are never kept; the key follows
what the trace depends on."""

import json

import torch
import torch.fx

from child import run_child
from kiln import _aot_cache

# A small CNN under torch.compile, called at batch 2 and then at batch 3 (dynamo's second graph
# has a symbolic batch size); prints what AOTAutograd and kiln did and the outputs.
_CODE = """
import json, torch, kiln
from torch._dynamo.utils import counters
torch.manual_seed({seed})
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
torch.manual_seed(1)
inputs = [torch.randn(2, 3, 12, 12), torch.randn(3, 3, 12, 12)]
outs = []
with torch.no_grad():
    compiled = torch.compile(model, backend="kiln")
    for x in inputs:
        out = compiled(x)
        torch.testing.assert_close(out, model(x), atol=1e-4, rtol=1e-4)
        outs.append(out.flatten().tolist())
print(json.dumps({{"traced": counters["aot_autograd"]["total"],
                  "loaded": kiln.stats()["aot_graphs_loaded"],
                  "partitioned": kiln.stats()["partitioned_graphs_loaded"], "outs": outs}}))
"""


def _run(cache, seed=0) -> dict:
    out = run_child(_CODE.format(seed=seed), env={"KILN_CACHE_DIR": str(cache)})
    return json.loads(out.splitlines()[-1])


def test_a_second_process_skips_aotautograd_for_static_inference_graphs(tmp_path):
    first = _run(tmp_path)
    assert first["traced"] == 2 and first["loaded"] == 0, first
    second = _run(tmp_path)
    # The static graph comes from the cache; the symbolic one is traced again.
    assert second["traced"] == 1 and second["loaded"] == 1, second
    assert second["partitioned"] == 1, second  # kiln's partitioning read, not done again
    assert second["outs"] == first["outs"]  # bit for bit
    # Another checkpoint of the architecture: the same entry, its own weights (checked
    # against its eager results in the child).
    other = _run(tmp_path, seed=7)
    assert other["loaded"] == 1 and other["outs"][0] != first["outs"][0], other


_WRAPPED = """
import json, torch, kiln
from torch._dynamo.utils import counters

class Counting(torch.nn.Module):  # mutates a buffer: AOTAutograd's runtime copies it back
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))
    def forward(self, x):
        self.calls.add_(1)
        return x * 2

class Aliasing(torch.nn.Module):  # returns a view of its input: AOTAutograd regenerates it
    def forward(self, x):
        return torch.relu(x) + 1, x.view(-1)

results = []
with torch.no_grad():
    for model in (Counting(), Aliasing()):
        compiled = torch.compile(model, backend="kiln")
        x = torch.randn(4, 4)
        out = compiled(x)
        out = compiled(x)
        if isinstance(model, Counting):
            results.append(float(model.calls))
            assert torch.equal(out, x * 2)
        else:
            results.append(out[1].data_ptr() == x.data_ptr())
            assert torch.equal(out[0], torch.relu(x) + 1)
print(json.dumps({"traced": counters["aot_autograd"]["total"],
                  "loaded": kiln.stats()["aot_graphs_loaded"], "results": results}))
"""


def test_graphs_aotautograds_runtime_works_for_are_never_kept(tmp_path):
    for _ in range(2):
        out = run_child(_WRAPPED, env={"KILN_CACHE_DIR": str(tmp_path)})
        result = json.loads(out.splitlines()[-1])
        assert result["traced"] == 2 and result["loaded"] == 0, result
        assert result["results"] == [2.0, True], result


def _mlp(w1, b1, w2, x):  # as dynamo hands a backend a module: its weights are inputs
    return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)), w2)


def _relu(w1, b1, w2, x):
    return torch.relu(x)


def test_the_key_follows_the_graph_its_inputs_and_the_options():
    weights = [torch.randn(8, 4), torch.randn(8), torch.randn(2, 8)]
    x = torch.randn(3, 4)

    def key(fn=_mlp, inputs=None, options=None):
        gm = torch.fx.symbolic_trace(fn)
        return _aot_cache.graph_key(gm, inputs or [*weights, x], options or {})

    with torch.no_grad():
        base = key()
        assert base is not None and len(base) == 32
        # Another checkpoint of the architecture: the same key.
        assert key(inputs=[torch.randn_like(w) for w in weights] + [x]) == base
        assert key(options={"precision": "bf16"}) != base
        assert key(inputs=[*weights, torch.randn(5, 4)]) != base
        assert key(inputs=[*weights, x.double()]) != base
        assert key(inputs=[*weights, torch.randn(4, 3).t()]) != base  # strides
        assert key(inputs=[*weights[:2], torch.nn.Parameter(weights[2]), x]) != base
        assert key(fn=_relu) != base  # the code
        assert key(inputs=[*weights, 3]) is None  # a number as an input
    assert key() is None  # grad mode on: a training graph
