"""kiln._C.cuda_status(): what CUDA code generation has to work with on this machine."""

import torch

import kiln


def test_cuda_status_names_nvrtc_and_says_why_not():
    status = kiln._C.cuda_status()
    assert set(status) == {"nvrtc", "nvrtc_version", "unavailable"}
    if status["nvrtc"]:
        assert int(status["nvrtc_version"]) >= 11000, status
    if not torch.cuda.is_available():
        # Without a GPU something is missing, and the reason names it.
        assert status["unavailable"], status
        assert "driver" in status["unavailable"] or "NVRTC" in status["unavailable"], status
    else:
        assert status["unavailable"] == "", status
