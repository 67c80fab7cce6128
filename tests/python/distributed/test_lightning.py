"""kiln under Lightning, 2 CPU processes over gloo: Fabric re-applying the user's compile over
DDP, and the Trainer with kiln.integrations.lightning.KilnDDPStrategy."""

import json

import pytest
import torch

from launch import run_worker

KWARGS = {"options": {"strict": True, "max_specializations": 4}}
ATOL, RTOL = 1e-5, 1e-4


def assert_close_parameters(actual: dict, expected: dict, what: str):
    assert actual.keys() == expected.keys(), what
    for name, values in actual.items():
        torch.testing.assert_close(torch.tensor(values), torch.tensor(expected[name]), atol=ATOL,
                                   rtol=RTOL, msg=lambda m: f"{what}, {name}: {m}")


@pytest.mark.parametrize("compile_with, recorded_kwargs", [
    ("torch", {"backend": "kiln", **KWARGS}),
    # kiln.compile records backend="kiln" with the kwargs, so Fabric's torch.compile(ddp,
    # **_compile_kwargs) compiles with kiln again (not Inductor).
    ("kiln", {"backend": "kiln", **KWARGS}),
], ids=["torch.compile", "kiln.compile"])
def test_fabric_recompiles_ddp_with_kiln_and_trains_like_eager(tmp_path, compile_with, recorded_kwargs):
    results = run_worker("fabric_worker.py", tmp_path, "--compile", compile_with,
                         "--kwargs", json.dumps(KWARGS))
    for rank, result in enumerate(results):
        assert "error" not in result, f"rank {rank}: {result['error']}"
        # Fabric built _FabricModule(OptimizedModule(DDP(net))) and compiled with the user's kwargs.
        assert result["structure"] == ["OptimizedModule", "DistributedDataParallel"]
        assert result["wraps_net"]
        assert result["kwargs"] == recorded_kwargs
        assert result["compiler"] == "kiln"
        assert result["stats"]["graphs"] > 0 and result["stats"]["regions"] > 0, result["stats"]
        assert all(torch.isfinite(torch.tensor(result["kiln_losses"])))
        torch.testing.assert_close(result["kiln_losses"], result["eager_losses"], atol=ATOL, rtol=RTOL)
        assert_close_parameters(result["kiln"], result["eager"], f"rank {rank}, kiln vs eager Fabric")
    assert_close_parameters(results[0]["kiln"], results[1]["kiln"], "rank 0 vs rank 1")


def test_trainer_with_kiln_ddp_strategy_compiles_ddp_and_trains_like_eager(tmp_path):
    results = run_worker("trainer_worker.py", tmp_path, "--kwargs", json.dumps(KWARGS))
    for rank, result in enumerate(results):
        seen = result["seen"]  # at the first training batch
        assert seen["model"] == "DistributedDataParallel"
        assert seen["ddp_compiled"], "strategy.model (the DDP module) is not compiled"
        assert not seen["steps_compiled"], "the LightningModule's own compile was not undone"
        assert result["compile_kwargs"] == {"backend": "kiln", **KWARGS}
        assert result["stats"]["graphs"] > 0 and result["stats"]["regions"] > 0, result["stats"]
        assert result["global_step"] == result["eager_global_step"] == 3
        assert_close_parameters(result["kiln"], result["eager"], f"rank {rank}, kiln vs eager Trainer")
        with pytest.raises(AssertionError):  # it did train
            assert_close_parameters(result["kiln"], result["initial"], "kiln vs initial")
        # KilnDDPStrategy(compile_kwargs=...) wins over the module's own kiln.compile kwargs.
        assert result["ctor_compile_kwargs"] == result["ctor_given"]
        assert result["ctor_seen"]["ddp_compiled"] and not result["ctor_seen"]["steps_compiled"]
        assert result["ctor_graphs"] > 0
    checkpoint_keys = results[0]["checkpoint_keys"]
    assert checkpoint_keys == sorted(results[0]["kiln"]), checkpoint_keys  # no _orig_mod. / module.
    assert_close_parameters(results[0]["kiln"], results[1]["kiln"], "rank 0 vs rank 1")
