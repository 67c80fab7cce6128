"""torch.compile inference graphs freeze the model's weights: parameters and buffers are compiled
in as constants, so batch norms fold into convolutions and weights are converted once. A weight
that changes afterwards (in place, through .data, by load_state_dict) is seen on the next call."""

import copy
import os
import pathlib

import torch

import kiln
from child import run_child
from models import ConvNet, assert_close, randomize_batch_norms


def _model():
    torch.manual_seed(0)
    return randomize_batch_norms(ConvNet().eval())


def _final_graphs(dump_dir: pathlib.Path) -> str:
    return "\n".join(p.read_text() for p in sorted(dump_dir.glob("*plan_memory.kir")))


def test_inference_freezes_weights_and_folds_batch_norms(tmp_path):
    model = _model()
    x = torch.randn(2, 3, 16, 16)
    kiln.reset_stats()
    compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
    with torch.no_grad():
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    # conv1, conv2 (weight, bias), bn1, bn2 (weight, bias, mean, var), fc (weight, bias)
    assert kiln.stats()["frozen_weights"] == 14, kiln.stats()
    graphs = _final_graphs(tmp_path)
    assert "batch_norm" not in graphs and "prim::Constant" in graphs, graphs


def test_training_graphs_keep_weights_as_inputs(tmp_path):
    model = _model().train()
    x = torch.randn(2, 3, 16, 16)
    kiln.reset_stats()
    compiled = torch.compile(model, backend="kiln")
    compiled(x).sum().backward()
    assert kiln.stats()["frozen_weights"] == 0
    assert model.conv1.weight.grad is not None


def test_a_weight_changed_after_compiling_is_seen_on_the_next_call():
    model = _model()
    x = torch.randn(2, 3, 16, 16)
    kiln.reset_stats()
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        model.conv1.weight.add_(0.25)  # in place: the version counter moves
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        model.bn2.running_var.mul_(3.0)
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        model.conv2.weight.data = torch.randn_like(model.conv2.weight)  # new storage
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        model.load_state_dict(_model().state_dict())
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    # The region stopped freezing at the first change and compiled once more.
    assert kiln.stats()["unfrozen_regions"] == 1, kiln.stats()


_MAX_WEIGHT_SETS = 4  # RegionRunner::kMaxWeightSets, as docs/torch-compile.md states it


def _run_instances_in_turn(count, rounds):
    """Compiles `count` instances of one model (different weights) and calls them in turn,
    each checked against its eager self; returns kiln's counters."""
    torch.manual_seed(1)
    models = [randomize_batch_norms(ConvNet().eval()) for _ in range(count)]
    x = torch.randn(2, 3, 16, 16)
    kiln.reset_stats()
    compiled = [torch.compile(m, backend="kiln") for m in models]
    with torch.no_grad():
        for _ in range(rounds):
            for model, run in zip(models, compiled):
                assert_close(run(x), model(x), atol=1e-4, rtol=1e-4)
    return kiln.stats()


def test_instances_of_one_model_keep_their_own_frozen_weights():
    # Dynamo compiles the class's forward once for all instances, so one region sees each
    # instance's weights in turn: each set gets frozen plans of its own.
    stats = _run_instances_in_turn(2, rounds=3)
    assert stats["graphs"] == 1 and stats["unfrozen_regions"] == 0, stats
    assert stats["frozen_weights"] == 2 * 14, stats


def test_more_instances_than_weight_sets_compile_with_the_weights_as_inputs():
    stats = _run_instances_in_turn(_MAX_WEIGHT_SETS + 1, rounds=2)
    assert stats["unfrozen_regions"] == 1, stats


def test_weights_a_graph_writes_are_not_frozen():
    # A compiled optimizer step writes the parameters it reads: freezing them would only mean
    # a compile to undo at the next call.
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)
    reference = copy.deepcopy(model)
    x = torch.randn(4, 16)
    for m in (model, reference):
        m(x).square().sum().backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    expected = torch.optim.SGD(reference.parameters(), lr=0.1)
    kiln.reset_stats()
    step = torch.compile(optimizer.step, backend="kiln")
    for _ in range(3):
        step()
        expected.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p.detach(), q.detach(), atol=1e-6, rtol=1e-6)
    stats = kiln.stats()
    assert stats["regions"] >= 1 and stats["frozen_weights"] == 0, stats
    assert stats["unfrozen_regions"] == 0, stats


def test_weights_stay_inputs_with_freezing_disabled():
    code = (
        "import sys, torch, kiln\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_frozen_weights import _model\n"
        "m = _model(); x = torch.randn(2, 3, 16, 16)\n"
        "with torch.no_grad():\n"
        "    torch.testing.assert_close(torch.compile(m, backend='kiln')(x), m(x), atol=1e-4, rtol=1e-4)\n"
        "print(kiln.stats()['frozen_weights'])\n")
    assert run_child(code, disabled="freeze_weights").split()[-1] == "0"


def test_weights_freeze_with_modules_not_inlined():
    # The setting the README gives for batch-1 latency: dynamo keeps the parameters as module
    # attributes (guarded through the module) instead of one guarded input each. AOTAutograd
    # still hands them to kiln as the graph's static inputs, frozen the same way, and a change
    # is still seen.
    model = _model()
    x = torch.randn(2, 3, 16, 16)
    kiln.reset_stats()
    with torch._dynamo.config.patch(inline_inbuilt_nn_modules=False), torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="kiln")
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        assert kiln.stats()["frozen_weights"] == 14, kiln.stats()
        model.conv1.weight.add_(0.25)
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        model.fc.weight.data = torch.randn_like(model.fc.weight)
        assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    torch._dynamo.reset()


class _ResultsOfWeightsAlone(torch.nn.Module):
    """Returns tensors computed from weights alone (and a size), which constant folding could
    compute once: eager makes them anew each call, so a caller may write into them; and writes in
    place into one such tensor before reading it (which stays in TorchScript's interpreter)."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(12))

    def forward(self, x):
        copied = self.table.clone()
        written = self.table.clone()
        part = written[4:8].add_(x.sum())
        return x * 2, copied, copied, self.table[1:3] * 2, torch.zeros(x.shape[0], 4), written, part


def test_results_computed_from_weights_alone_are_the_callers_own():
    model = _ResultsOfWeightsAlone().eval()
    x = torch.randn(3)
    with torch.no_grad():
        entry_points = {
            "torch.compile": torch.compile(copy.deepcopy(model), backend="kiln"),
            "trace": kiln.compile(torch.jit.trace(model, x)),
            "script": kiln.compile(torch.jit.script(model)),
        }
        for name, compiled in entry_points.items():
            for _ in range(3):
                got, want = compiled(x), model(x)
                for i, (g, w) in enumerate(zip(got, want)):
                    assert torch.equal(g, w), (name, i)
                assert got[1].data_ptr() == got[2].data_ptr(), name  # `copied` twice, as eager
                for g in got:
                    g.add_(100)  # the caller's to write: the next call is unchanged


def test_compiles_of_one_model_share_their_folded_weights():
    """Every compile folds the batch norm into the convolution's weight and packs it for oneDNN;
    a later compile of the model (another batch size on the TorchScript path, dynamo's graph with
    a symbolic batch under torch.compile) takes the tensors an earlier one folded to the same
    bytes instead of keeping copies of its own."""
    torch.manual_seed(1234)  # weights no other test folds
    model = randomize_batch_norms(torch.nn.Sequential(
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU()).eval())
    weight_bytes = model[0].weight.numel() * 4
    example = torch.randn(2, 64, 8, 8)
    entry_points = {"torch.compile": lambda: torch.compile(model, backend="kiln"),
                    "TorchScript": lambda: kiln.compile(torch.jit.trace(model, (example,)))}
    for name, compile_model in entry_points.items():
        torch._dynamo.reset()
        kiln.reset_stats()
        compiled = compile_model()
        with torch.no_grad():
            for batch in (2, 3, 5):
                x = torch.randn(batch, 64, 8, 8)
                assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        stats = kiln.stats()
        assert stats["specializations"] >= 2, (name, stats)
        # The folded weight and its packed copy, at least.
        assert stats["shared_constant_bytes"] >= 2 * weight_bytes, (name, stats)
