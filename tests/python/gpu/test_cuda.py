"""kiln on CUDA, end to end: both entry points, inference and training, the current stream, no
host synchronization, and mode="reduce-overhead" as a CUDA graph. Needs a GPU; without one every
test here is skipped (scripts/gpu-check runs them on a GPU machine)."""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "backend"))

import kiln  # noqa: E402
from models import ConvNet, Mlp  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _close(got, want, atol=1e-4, rtol=1e-4):
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    kiln.reset_stats()
    yield
    torch.cuda.synchronize()


class Chain(torch.nn.Module):
    def forward(self, x, y):
        return torch.sigmoid(torch.tanh(x * y + 1.5) - y).relu() * 0.5


class Softmaxes(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1) + torch.layer_norm(x, x.shape[-1:])


def test_fused_kernels_run_on_cuda_and_match_eager():
    x, y = torch.randn(64, 1000, device="cuda"), torch.randn(1000, device="cuda")
    compiled = torch.compile(Chain(), backend="kiln")
    _close(compiled(x, y), Chain()(x, y), atol=1e-5, rtol=1e-5)
    stats = kiln.stats()
    assert stats["kernels"] >= 1 and stats["fallbacks"] == 0, stats


@pytest.mark.parametrize("shape", [(8, 1024), (300, 77), (2, 1 << 18), (3, 100003)])
def test_softmax_and_layer_norm_rows(shape):
    x = torch.randn(*shape, device="cuda")
    _close(torch.compile(Softmaxes(), backend="kiln")(x), Softmaxes()(x))
    assert kiln.stats()["kernels"] >= 1


def test_a_stream_of_row_counts_runs_one_shape_class_of_size_generic_kernels():
    # The rows move, each row's 96 elements do not: one block size, one class. dynamo's first
    # graph is static (5 rows), its symbolic one compiles the class (7); the other counts are
    # plans of that class, each binding the same CUDA kernels to its sizes.
    model = Softmaxes()
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        for rows in [5, 7, 9, 12, 31, 64, 1000, 9, 3]:
            x = torch.randn(rows, 96, device="cuda")
            _close(compiled(x), model(x))
    stats = kiln.stats()
    assert stats["shape_classes"] == 1 and stats["fallbacks"] == 0, stats
    assert stats["class_plans"] >= 5 and stats["specializations"] == 2, stats


def test_a_stream_of_row_lengths_runs_one_shape_class_up_to_the_row_caches_reach():
    # Softmax over the last dim as attention's rows: lengths 1 to 2048 share one block and one
    # row cache in a size-generic kernel, so dynamo's symbolic graph compiles one class for them.
    model = Softmaxes()
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        for length in [17, 19, 2, 33, 200, 511, 1024, 2048, 5, 96]:
            x = torch.randn(8, length, device="cuda")
            _close(compiled(x), model(x))
    stats = kiln.stats()
    assert stats["shape_classes"] == 1 and stats["fallbacks"] == 0, stats


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes(dtype):
    x, y = (torch.randn(33, 129, device="cuda", dtype=dtype) for _ in range(2))
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float64: 1e-10}[dtype]
    _close(torch.compile(Chain(), backend="kiln")(x, y), Chain()(x, y), tolerance, tolerance)


def test_a_call_does_not_synchronize_with_the_host():
    model = Mlp().cuda().eval()
    x = torch.randn(16, 32, device="cuda")
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        compiled(x)  # compiles (that may synchronize)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = compiled(x)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        _close(out, model(x))


def test_kernels_follow_the_current_stream():
    x, y = torch.randn(256, 4096, device="cuda"), torch.randn(4096, device="cuda")
    compiled = torch.compile(Chain(), backend="kiln")
    compiled(x, y)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = compiled(x, y)
    stream.synchronize()
    _close(out, Chain()(x, y), atol=1e-5, rtol=1e-5)


def test_training_matches_eager():
    torch.manual_seed(0)
    eager = Mlp().cuda()
    compiled_model = Mlp().cuda()
    compiled_model.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_model, backend="kiln")
    x = torch.randn(16, 32, device="cuda")
    target = torch.randint(0, 10, (16,), device="cuda")
    for model, fn in ((eager, eager), (compiled_model, compiled)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.nll_loss(fn(x), target).backward()
            optimizer.step()
    for a, b in zip(eager.parameters(), compiled_model.parameters()):
        _close(b, a, atol=1e-4, rtol=1e-4)


def test_conv_net_inference():
    model = ConvNet().cuda().eval()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    with torch.no_grad():
        _close(torch.compile(model, backend="kiln")(x), model(x))


def test_reduce_overhead_replays_a_cuda_graph():
    model = Mlp().cuda().eval()
    compiled = torch.compile(model, backend="kiln", mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 32, device="cuda")
            first = compiled(x)
            _close(first, model(x))
        second = compiled(torch.randn(4, 32, device="cuda"))
        assert first.data_ptr() != second.data_ptr()  # results are the caller's to keep
    assert kiln.stats()["cuda_graphs"] == 1


def test_a_changed_weight_is_seen_under_cuda_graph_replay():
    # Replayed graphs keep weights as inputs: an in-place update shows on the next replay.
    model = Mlp().cuda().eval()
    compiled = torch.compile(model, backend="kiln", mode="reduce-overhead")
    x = torch.randn(4, 32, device="cuda")
    with torch.no_grad():
        for _ in range(3):
            _close(compiled(x), model(x))
        next(model.parameters()).add_(0.5)
        _close(compiled(x), model(x))


def test_cuda_inference_freezes_weights_and_sees_changes():
    kiln.reset_stats()
    model = ConvNet().cuda().eval()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        _close(compiled(x), model(x))
        assert kiln.stats()["frozen_weights"] > 0
        model.conv1.weight.mul_(2.0)
        _close(compiled(x), model(x))
    assert kiln.stats()["unfrozen_regions"] == 1


def test_torchscript_path_on_cuda():
    model = Mlp().cuda().eval()
    x = torch.randn(8, 32, device="cuda")
    compiled = kiln.compile(torch.jit.trace(model, (x,)))
    with torch.no_grad():
        _close(compiled(x), model(x))
    assert kiln.stats()["kernels"] >= 1


def test_convnext_stage_trains_without_falling_back():
    """cuDNN returns channels-last convolution outputs for channels-last inputs, as the CPU does
    (backend/capture/conv_layout.h): the backward graph's views of them import."""
    from models import ConvNeXtStage

    torch.manual_seed(0)
    model, reference = ConvNeXtStage().cuda(), ConvNeXtStage().cuda()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 16, 16, device="cuda")
    torch.compile(model, backend="kiln")(x).square().sum().backward()
    reference(x).square().sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        _close(p.grad, q.grad, atol=1e-3, rtol=1e-3)
    stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["graph_fallbacks"] == 0, stats
