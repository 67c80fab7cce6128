"""A compiled plan that fails when it runs: the call runs the way it would without kiln.

The region here is built by hand so that kiln's plan fails where its fallback does not, as a
kiln bug would make it: the plan gathers rows with indices past the end (ATen's index_select
raises when it runs; its meta function cannot see index values), while the fallback clamps them.
"""

import pytest
import torch

import kiln
from kiln import _C


def region(strict: bool, fallback, weights=()):
    program = _C.FxProgram(2)  # x, idx
    (out,) = program.call("aten::index_select", [("ref", 0), ("const", 0), ("ref", 1)])
    program.set_outputs([out])
    options = {"strict": "true"} if strict else {}
    return _C.Region(program, options, "gather", fallback, list(weights))


def clamped_gather(x, idx):
    return [x.index_select(0, idx.clamp(max=x.shape[0] - 1))]


X = torch.arange(12.0).view(4, 3)
OUT_OF_RANGE = torch.tensor([1, 7])


# With x a weight, the plan freezes it and is found by its signature and its set of weights.
@pytest.mark.parametrize("weights", [(), (0,)], ids=["no_weights", "frozen_weight"])
def test_a_plan_that_fails_when_it_runs_falls_back_and_stays_on_the_fallback(weights):
    kiln.reset_stats()
    gather = region(False, clamped_gather, weights)
    (got,) = gather.run([X, OUT_OF_RANGE])
    torch.testing.assert_close(got, clamped_gather(X, OUT_OF_RANGE)[0])
    assert kiln.stats()["fallbacks"] == 1
    assert kiln.stats()["frozen_weights"] == len(weights)
    explained = gather.explain()
    assert "compiled plan failed where eager PyTorch did not" in explained
    # The signature stays on the fallback: no second failure, no second count.
    (again,) = gather.run([X, OUT_OF_RANGE])
    torch.testing.assert_close(again, got)
    assert kiln.stats()["fallbacks"] == 1
    assert "compiled plan failed" in gather.explain()


def test_strict_raises_an_internal_error_naming_the_plan_failure():
    gather = region(True, clamped_gather)
    with pytest.raises(kiln.KilnError, match="compiled plan failed where eager PyTorch did not"):
        gather.run([X, OUT_OF_RANGE])


def test_an_error_the_fallback_raises_too_is_the_callers_and_keeps_its_message():
    def eager(x, idx):
        return [x.index_select(0, idx)]

    gather = region(False, eager)
    kiln.reset_stats()
    with pytest.raises(IndexError, match="out of range"):
        gather.run([X, OUT_OF_RANGE])
    assert kiln.stats()["fallbacks"] == 0
    # The plan stays compiled for inputs it can serve.
    (got,) = gather.run([X, torch.tensor([3, 0])])
    torch.testing.assert_close(got, X[[3, 0]])

