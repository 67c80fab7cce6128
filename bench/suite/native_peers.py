"""OpenVINO and ONNX Runtime run the way their own users run them: the model converted once
(OpenVINO's converter; torch.onnx.export for ONNX Runtime), then compiled by the runtime's own
API, not through torch.compile. Each returns a callable that takes and returns torch tensors,
like the other backends, so the bench times all of them alike.

Inputs are handed over without a copy (numpy views of the tensors); outputs are copied out of
the runtime's buffers into tensors the caller owns, as kiln's and eager's are.
"""

from __future__ import annotations

import os
import tempfile

import torch


def _outputs(arrays: list):
    tensors = [torch.from_numpy(a) for a in arrays]
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def openvino(model: torch.nn.Module, inputs: tuple, f32: bool):
    """OpenVINO's native API: convert_model, then compile_model on the CPU. `f32` sets the f32
    precision hint; without it OpenVINO picks its default (bf16 on CPUs that have it). The
    thread count is the bench's."""
    import openvino as ov

    with torch.no_grad():
        converted = ov.convert_model(model, example_input=inputs)
    config = {"INFERENCE_NUM_THREADS": torch.get_num_threads()}
    if f32:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = ov.Core().compile_model(converted, "CPU", config)
    request = compiled.create_infer_request()

    def run(*args):
        result = request.infer([a.numpy() for a in args], share_inputs=True, share_outputs=False)
        return _outputs(list(result.values()))

    return run


def export_onnx(model: torch.nn.Module, inputs: tuple, path: str) -> str:
    """Writes the model as ONNX with torch.onnx.export's default exporter (the dynamo one, which
    goes through torch.export); falls back to the TorchScript exporter where that fails. Returns
    which exporter wrote it."""
    with torch.no_grad():
        try:
            torch.onnx.export(model, inputs, path, dynamo=True, verbose=False)
            return "dynamo"
        except Exception:  # noqa: BLE001  the fallback exporter is what such users get
            torch.onnx.export(model, inputs, path, dynamo=False)
            return "torchscript"


def onnxruntime(model: torch.nn.Module, inputs: tuple):
    """ONNX Runtime, CPU execution provider, every graph optimization, intra-op threads as many
    as the bench's and not spinning (a spinning pool would take the cores from the backends timed
    after it in each round)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        exporter = export_onnx(model, inputs, path)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*args):
        return _outputs(session.run(None, {n: a.numpy() for n, a in zip(names, args)}))

    run.exporter = exporter
    return run
