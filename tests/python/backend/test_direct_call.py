"""A compiled graph that is one region is called as the region itself (kiln/_direct.py): its
inputs go straight to kiln, and its outputs (the region's, some of the graph's inputs, Nones)
come back in the graph's order."""

import copy

import pytest
import torch

import kiln
import kiln._backend
from models import Mlp, assert_close


@pytest.fixture
def runners(monkeypatch):
    """What region_runner returned for each graph compiled meanwhile (None: not one region)."""
    made = []
    original = kiln._backend._direct.region_runner

    def spy(gm):
        made.append(original(gm))
        return made[-1]

    monkeypatch.setattr(kiln._backend._direct, "region_runner", spy)
    return made


def test_an_inference_graph_of_one_region_is_called_directly(runners):
    torch.manual_seed(0)
    model = Mlp().eval()
    compiled = torch.compile(model, backend="kiln")
    with torch.no_grad():
        for batch in (2, 2, 5):
            x = torch.randn(batch, 32)
            assert_close(compiled(x), model(x))
    assert runners and all(r is not None for r in runners), runners


def test_a_training_step_returns_inputs_and_nones_in_the_graphs_order(runners):
    # The forward graph returns saved inputs beside the region's outputs; the backward graph
    # returns None for the input that needs no gradient.
    torch.manual_seed(0)
    model = Mlp().train()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="kiln")
    x = torch.randn(4, 32)
    for m in (compiled, reference):
        m(x).square().mean().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p.grad, q.grad)
    assert len(runners) == 2 and all(r is not None for r in runners), runners


def test_a_graph_with_ops_run_eagerly_keeps_its_fx_forward(runners):
    def f(x):
        a = torch.relu(x)
        z = torch.view_as_complex(a.view(16, 2))  # complex64: regions hold real dtypes only
        return torch.view_as_real(z * z).view(32).exp() + a

    x = torch.randn(32)
    assert_close(torch.compile(f, backend="kiln")(x), f(x))
    assert runners == [None]
