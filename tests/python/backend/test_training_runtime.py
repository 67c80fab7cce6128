"""Training graphs on kiln's own autograd Function (kiln/_training.py): the same losses,
gradients and buffer updates as eager over several optimizer steps, and AOTAutograd's runtime
for the graphs that need it (outputs aliasing inputs, input mutations that need grad)."""

import copy

import pytest
import torch

import kiln
from models import assert_close


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                          torch.nn.Linear(32, 8))

    def forward(self, x):
        return self.layers(x)


class _ConvBatchNorm(torch.nn.Module):
    """BatchNorm in training mode writes its running statistics: input mutations."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))


class _TwoOutputs(torch.nn.Module):
    """A differentiable output the loss may leave unused, and an integer one."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 6)

    def forward(self, x):
        y = self.linear(x)
        return torch.tanh(y), y.argmax(dim=1)


def _train(model, x, steps=3, loss=lambda out: out.square().mean()):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        value = loss(model(x))
        value.backward()
        optimizer.step()
        losses.append(value.detach())
    return losses


def _matches_eager(make_model, x, **kwargs):
    reference = make_model().train()
    model = copy.deepcopy(reference)
    kiln.reset_stats()
    got = _train(torch.compile(model, backend="kiln"), x, **kwargs)
    want = _train(reference, x, **kwargs)
    for a, b in zip(got, want):
        assert_close(a, b, atol=1e-5, rtol=1e-4)
    for (name, p), q in zip(model.state_dict().items(), reference.state_dict().values()):
        assert_close(p.float(), q.float(), atol=1e-5, rtol=1e-4), name
    return kiln.stats()


def test_an_mlp_trains_on_kilns_autograd_function():
    stats = _matches_eager(_Mlp, torch.randn(5, 16))
    assert stats["kiln_autograd_graphs"] == 1, stats
    assert stats["graph_fallbacks"] == 0 and stats["fallbacks"] == 0, stats


def test_batch_norm_running_statistics_are_written_back():
    stats = _matches_eager(_ConvBatchNorm, torch.randn(2, 3, 6, 6))
    assert stats["kiln_autograd_graphs"] == 1, stats


def test_an_output_the_loss_does_not_use_and_an_integer_output():
    stats = _matches_eager(_TwoOutputs, torch.randn(4, 8),
                           loss=lambda out: out[0][:, :3].sum() + out[1].float().sum() * 0)
    assert stats["kiln_autograd_graphs"] == 1, stats


def test_a_gradient_with_unexpected_strides_is_restrided():
    """The output's grad reaches the backward transposed; the backward graph, compiled for the
    forward output's strides, views it as [10, 8]. (The linears over a 3-D input also make the
    output an unsafe view, which the forward returns as a tensor of its own.)"""
    x = torch.randn(2, 5, 16)
    weights = torch.arange(5.0)[None, :, None]
    stats = _matches_eager(_Mlp, x, loss=lambda out: (out.transpose(0, 2) * weights).sum())
    assert stats["kiln_autograd_graphs"] == 1, stats
    assert stats["specializations"] == 2, stats  # one for the forward, one for the backward


def test_an_output_can_be_changed_in_place():
    """As after AOTAutograd's runtime: the output is no view, so autograd allows it."""
    model = torch.compile(_Mlp(), backend="kiln")
    reference = copy.deepcopy(model._orig_mod)
    x = torch.randn(2, 5, 16)
    got, want = model(x), reference(x)
    got.mul_(2).sum().backward()
    want.mul_(2).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p.grad, q.grad)


def test_an_output_that_aliases_an_input_keeps_aotautograds_runtime():
    def f(x, w):
        return x.view(-1), torch.sin(x * w)

    x, w = torch.randn(3, 4), torch.randn(4, requires_grad=True)
    kiln.reset_stats()
    alias, y = torch.compile(f, backend="kiln")(x, w)
    y.sum().backward()
    assert alias.data_ptr() == x.data_ptr()
    expected = torch.autograd.grad(torch.sin(x * w).sum(), w)[0]
    assert_close(w.grad, expected)
    assert kiln.stats()["kiln_autograd_graphs"] == 0


def test_a_second_backward_through_the_graph_raises():
    """Double backward through kiln's compiled backward would silently lose the second-order
    terms: it raises instead (as AOTAutograd's runtime does)."""
    model = torch.compile(_Mlp(), backend="kiln")
    x = torch.randn(5, 16)
    params = list(model.parameters())
    grads = torch.autograd.grad(model(x).square().sum(), params, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice|double backward"):
        sum(g.sum() for g in grads).backward()


def test_a_gradient_penalty_raises_rather_than_drop_its_gradient():
    """grad(sum(f(x)), x, create_graph=True): the incoming grad needs no grad, only the saved
    tensors do. The first gradient is eager's; differentiating it raises (a penalty built on it
    would otherwise add nothing to the loss's gradient, silently)."""
    model = torch.compile(_Mlp(), backend="kiln")
    x = torch.randn(5, 16, requires_grad=True)
    (grad,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
    eager_x = x.detach().requires_grad_()
    (expected,) = torch.autograd.grad(model._orig_mod(eager_x).sum(), eager_x)
    assert_close(grad.detach(), expected)
    assert grad.requires_grad
    penalty = (grad.norm(dim=1) - 1).square().mean()
    with pytest.raises(RuntimeError, match="double backward"):
        penalty.backward()


def test_the_runtime_can_be_switched_to_aotautograds(monkeypatch):
    monkeypatch.setenv("KILN_TRAINING_RUNTIME", "aot")
    stats = _matches_eager(_Mlp, torch.randn(5, 16))
    assert stats["kiln_autograd_graphs"] == 0 and stats["graphs"] == 2, stats


def test_a_bad_runtime_choice_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("KILN_TRAINING_RUNTIME", "fast")
    with pytest.raises(Exception, match="KILN_TRAINING_RUNTIME='fast'; allowed: 'kiln', 'aot'"):
        torch.compile(_Mlp(), backend="kiln")(torch.randn(2, 16))
