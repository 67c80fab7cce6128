"""OpenVINO and ONNX Runtime run the way their own users run them (kiln._peers sets them up: the
model converted once, then compiled by the runtime's own API, not through torch.compile). Each
returns a callable that takes and returns torch tensors, like the other backends, so the bench
times all of them alike.

Inputs are handed over without a copy (numpy views of the tensors); outputs are copied out of
the runtime's buffers into tensors the caller owns, as kiln's and eager's are.
"""

from __future__ import annotations

import tempfile

import torch
from kiln import _peers


def _outputs(arrays: list):
    tensors = [torch.from_numpy(a) for a in arrays]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def openvino(model: torch.nn.Module, inputs: tuple, f32: bool):
    """OpenVINO's native API; `f32` sets the f32 precision hint, without it OpenVINO runs at its
    default precision (bf16 on CPUs that have it)."""
    request = _peers.openvino_request(model, inputs, f32)

    def run(*args):
        result = request.infer([a.numpy() for a in args], share_inputs=True, share_outputs=False)
        return _outputs(list(result.values()))

    return run


def onnxruntime(model: torch.nn.Module, inputs: tuple):
    """ONNX Runtime's CPU execution provider on the model exported with torch.onnx.export."""
    with tempfile.TemporaryDirectory() as tmp:
        session, exporter = _peers.onnxruntime_session(model, inputs, tmp)

    def run(*args):
        return _outputs(session.run(None, _peers.onnxruntime_feed(session, args)))

    run.exporter = exporter
    return run
