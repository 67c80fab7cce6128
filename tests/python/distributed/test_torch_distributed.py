"""kiln under torch.distributed wrappers, 2 CPU ranks over gloo: the trainer contract
(kiln.compile -> kiln.unwrap -> wrap -> kiln.recompile) trains to the eager parameters."""

import json

import torch

from launch import run_worker

KWARGS = {"options": {"strict": True, "max_specializations": 4}}  # strict: a failed graph raises
KWARGS_JSON = json.dumps(KWARGS)
ATOL, RTOL = 1e-5, 1e-4


def assert_trained_like_eager(results):
    for rank, result in enumerate(results):
        assert result["unwrap_is_net"], f"rank {rank}: kiln.unwrap did not return the compiled module"
        assert result["unwrap_kwargs"] == {"backend": "kiln", **KWARGS}  # as torch.compile got them
        assert result["recompiled"] == "OptimizedModule" and result["recompiled_is_wrapped"]
        assert result["stats"]["graphs"] > 0 and result["stats"]["regions"] > 0, result["stats"]
        assert result["stats"]["graph_fallbacks"] == 0, result["stats"]
        assert len(result["kiln_losses"]) == 5
        torch.testing.assert_close(result["kiln_losses"], result["eager_losses"], atol=ATOL, rtol=RTOL)
        assert result["kiln"].keys() == result["eager"].keys()
        for name, values in result["kiln"].items():
            torch.testing.assert_close(torch.tensor(values), torch.tensor(result["eager"][name]),
                                       atol=ATOL, rtol=RTOL, msg=lambda m: f"rank {rank} {name}: {m}")
    # Gradients were averaged across ranks: both hold the same parameters, although their data differ.
    assert results[0]["kiln_losses"] != results[1]["kiln_losses"]
    for name, values in results[0]["kiln"].items():
        torch.testing.assert_close(torch.tensor(values), torch.tensor(results[1]["kiln"][name]),
                                   atol=ATOL, rtol=RTOL)


def test_ddp_recompiled_trains_like_eager_ddp(tmp_path):
    results = run_worker("torch_worker.py", tmp_path, "--wrap", "ddp", "--kwargs", KWARGS_JSON)
    for result in results:
        assert result["recompiled_wraps"] == "DistributedDataParallel"
    assert_trained_like_eager(results)


def test_fsdp2_fully_shard_recompiled_trains_like_eager_fsdp(tmp_path):
    # FSDP2 (fully_shard) on a CPU DeviceMesh over gloo; the parameters compared are the full,
    # gathered ones.
    results = run_worker("torch_worker.py", tmp_path, "--wrap", "fsdp", "--kwargs", KWARGS_JSON)
    for result in results:
        assert result["recompiled_wraps"] == "FSDPNet"  # fully_shard swaps the class in place
    assert_trained_like_eager(results)

