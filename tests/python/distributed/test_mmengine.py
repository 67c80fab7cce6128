"""kiln under MMEngine: a Runner with cfg compile=dict(backend="kiln", ...) trains like eager."""

import json

import torch

from launch import run_worker

KWARGS = {"options": {"strict": True, "max_specializations": 8}}
ATOL, RTOL = 1e-5, 1e-4


def test_runner_compiles_train_step_with_kiln_and_trains_like_eager(tmp_path):
    # A subprocess too: MMEngine's registries and global instances stay out of pytest.
    [result] = run_worker("mmengine_worker.py", tmp_path, "--kwargs", json.dumps(KWARGS), ranks=1)
    assert result["iters"] == [4, 4]
    assert result["train_step_compiled"], "Runner did not compile model.train_step"
    stats = result["stats"]
    assert stats["graphs"] > 0 and stats["regions"] > 0 and stats["graph_fallbacks"] == 0, stats
    assert result["kiln"].keys() == result["eager"].keys()
    for name, values in result["kiln"].items():
        torch.testing.assert_close(torch.tensor(values), torch.tensor(result["eager"][name]),
                                   atol=ATOL, rtol=RTOL, msg=lambda m: f"{name}: {m}")
