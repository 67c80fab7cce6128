"""Training convolutional models under torch.compile: gradients match eager, and the backward
graph compiles in one region (convolution_backward leaves grad_bias, or grad_input for the first
convolution, uncomputed: an unread None output, which no longer cuts the graph)."""

import copy

import pytest
import torch

import kiln
from models import BiasFreeNet, ConvNeXtStage, assert_close


def _train_step_matches_eager(make_model, shape):
    model, reference = make_model().train(), make_model().train()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(shape)
    kiln.reset_stats()
    torch.compile(model, backend="kiln")(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-3), name
    return kiln.stats()


def test_a_bias_free_cnn_trains_in_one_region_per_graph():
    stats = _train_step_matches_eager(BiasFreeNet, (4, 3, 12, 12))
    assert stats["graphs"] == 2 and stats["regions"] == 2 and stats["eager_ops"] == 0, stats
    assert stats["fallbacks"] == 0, stats


@pytest.mark.parametrize("training", [False, True])
def test_convnext_stages_compile_without_falling_back(training):
    """A `view` after the permute only works on a channels-last convolution output, which the
    CPU kernel returns and the meta kernel kiln infers shapes with does not."""
    if training:
        stats = _train_step_matches_eager(ConvNeXtStage, (2, 3, 16, 16))
    else:
        model = ConvNeXtStage().eval()
        x = torch.randn(2, 3, 16, 16)
        kiln.reset_stats()
        with torch.no_grad():
            assert_close(torch.compile(model, backend="kiln")(x), model(x))
        stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["graph_fallbacks"] == 0, stats
    assert stats["eager_ops"] == 0, stats


class _ConvBatchNormRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def test_batch_norm_backward_is_one_kernel(tmp_path):
    """The relu's gradient, batch norm's two per-channel sums and its input gradient: one kernel
    (sibling sums, and their unsqueezes to [1, C, 1, 1] inside it), matching eager."""
    torch.manual_seed(0)
    model, reference = _ConvBatchNormRelu().train(), _ConvBatchNormRelu().train()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 6, 6)
    compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
    compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4), name
    (plan,) = [p for p in tmp_path.iterdir() if "backward" in p.name and
               p.name.endswith("plan_memory.kir")]
    fused = [line for line in plan.read_text().splitlines()
             if line.startswith("  %") and "kiln::fused(" in line]
    full_size = [line for line in fused if "f32[4,8,6,6]" in line.split("=")[0]]
    assert len(full_size) == 1, fused
    assert "reduction=" in full_size[0], fused


@pytest.mark.parametrize("variant", ["nchw", "channels_last", "no_running_stats"])
def test_training_batch_norm_forward_is_one_kernel_with_its_relu(variant, tmp_path):
    """Training batch norm is decomposed (kiln._decompositions.DECOMPOSED_TOO): its statistics,
    the normalization and the relu run as one kernel, and the output, the running statistics and
    the gradients match eager."""
    torch.manual_seed(0)
    model = _ConvBatchNormRelu()
    if variant == "no_running_stats":
        model.bn = torch.nn.BatchNorm2d(8, track_running_stats=False)
    reference = _ConvBatchNormRelu()
    reference.bn = torch.nn.BatchNorm2d(8, track_running_stats=variant != "no_running_stats")
    reference.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 6, 6)
    if variant == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    compiled = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
    for _ in range(2):  # the running statistics move twice
        out, expected = compiled(x), reference(x)
        assert_close(out, expected, atol=1e-5, rtol=1e-5)
    if variant != "no_running_stats":
        assert_close(model.bn.running_mean, reference.bn.running_mean, atol=1e-6, rtol=1e-6)
        assert_close(model.bn.running_var, reference.bn.running_var, atol=1e-6, rtol=1e-6)
        assert model.bn.num_batches_tracked.item() == reference.bn.num_batches_tracked.item() == 2
    out.square().sum().backward()
    expected.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4), name
    (plan,) = [p for p in tmp_path.iterdir() if "forward" in p.name and
               p.name.endswith("plan_memory.kir")]
    text = plan.read_text()
    assert "batch_norm" not in text, text
    fused = [line for line in text.splitlines() if line.startswith("  %") and "kiln::fused(" in line]
    full_size = [line for line in fused if "f32[4,8,6,6]" in line.split("=")[0]]
    assert len(full_size) == 1 and "reduction=" in full_size[0], fused


def test_group_norm_is_decomposed_and_fused_with_its_activation(tmp_path):
    """Inference: native_group_norm is kept (KEPT_FOR_INFERENCE) and kiln's decompose_group_norm
    takes it apart: per-channel statistics in one kernel, combined per group in a small one, the
    normalization, affine and SiLU in the next. Training: torch's decomposition (DECOMPOSED_TOO).
    Both match eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.GroupNorm(8, 32),
                                torch.nn.SiLU())
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-0.5, 0.5)
    reference = copy.deepcopy(model)
    x = torch.randn(2, 16, 12, 12)
    with torch.no_grad():
        compiled = torch.compile(model.eval(), backend="kiln",
                                 options={"dump_dir": str(tmp_path)})
        assert_close(compiled(x), reference.eval()(x), atol=1e-5, rtol=1e-5)
    (plan,) = [p for p in tmp_path.iterdir() if p.name.endswith("plan_memory.kir")]
    text = plan.read_text()
    assert "group_norm" not in text, text
    statistics = [line for line in text.splitlines() if "reduction=" in line]
    assert len(statistics) == 2, text
    assert "f32[2,32,1,1]" in statistics[0] and "f32[2,8,4]" in statistics[1], text
    # the SiLU (x * sigmoid(x) after decomposition) in a kernel with the normalization
    bodies = text.split("kiln::fused(")[1:]
    assert any("aten::sigmoid" in b.split("return")[0] and "aten::add.Tensor" in b.split("return")[0]
               for b in bodies), text
    torch._dynamo.reset()
    model.train(), reference.train()
    torch.compile(model, backend="kiln")(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-4), name


def test_norms_are_decomposed_for_cpu_graphs_only():
    """On CUDA the norms stay whole (cuDNN's kernels; whether kiln's reduction kernels, which walk
    a row once per reduction, would beat them is not measured without a GPU). Inference graphs
    keep group norm for kiln's own decomposition."""
    from types import SimpleNamespace

    from kiln import _decompositions

    for op in _decompositions.DECOMPOSED_TOO:
        assert op in _decompositions.decomposition_table(cpu=True), op
        assert op not in _decompositions.decomposition_table(cpu=False), op
        inference = _decompositions.decomposition_table(cpu=True, inference=True)
        assert (op in inference) == (op not in _decompositions.KEPT_FOR_INFERENCE), op
    cpu, cuda = torch.randn(2), SimpleNamespace(device=torch.device("cuda", 0))
    assert _decompositions.runs_on_cpu([cpu, 3], None)
    assert not _decompositions.runs_on_cpu([cpu, cuda], None)
    assert not _decompositions.runs_on_cpu([cpu], "cuda")


def test_input_gradients_through_an_instance_norm_in_another_layout_match_eager():
    # The norm's input is made contiguous, the gradient reaching it from the channels-last
    # convolution is not: torch's decomposition of the norm's backward returned the gradient in
    # the wrong layout for AOTAutograd, so it stays whole there (kiln._decompositions).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.InstanceNorm2d(16), torch.nn.Conv2d(16, 4, 3, padding=1))
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(1, 16, 16, 16).contiguous(memory_format=torch.channels_last)
    projection = torch.randn(1, 4, 16, 16)

    def input_gradient(call):
        leaf = x.clone().requires_grad_()
        (call(leaf) * projection).sum().backward()
        return leaf.grad

    want = input_gradient(model)
    got = input_gradient(torch.compile(model, backend="kiln"))
    assert_close(got, want, atol=1e-5, rtol=1e-4)
