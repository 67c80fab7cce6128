"""OpenVINO and ONNX Runtime set up the way their own users run them: the model converted once
(OpenVINO's converter; torch.onnx.export for ONNX Runtime), then compiled by the runtime's own
API on the CPU. Shared by the bench (its native peers) and kiln.profile (their profilers)."""

from __future__ import annotations

import os

import torch


def openvino_request(model, inputs: tuple, f32: bool, perf_count: bool = False):
    """An OpenVINO infer request for `model`: convert_model, then compile_model on the CPU with
    torch's thread count. `f32` sets the f32 precision hint; without it OpenVINO picks its default
    (bf16 on CPUs that have it). `perf_count` turns on its per-layer counters (PERF_COUNT) and
    fixes the input shapes to the example's, as OpenVINO's benchmark_app does, so its execution
    graph has the sizes of every layer."""
    import openvino as ov

    static = [tuple(t.shape) for t in inputs] if perf_count else None
    with torch.no_grad():
        converted = ov.convert_model(model, example_input=inputs, input=static)
    config = {"INFERENCE_NUM_THREADS": torch.get_num_threads()}
    if f32:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    if perf_count:
        config["PERF_COUNT"] = "YES"
    return ov.Core().compile_model(converted, "CPU", config).create_infer_request()


def export_onnx(model, inputs: tuple, path: str) -> str:
    """Writes the model as ONNX with torch.onnx.export's default exporter (the dynamo one, which
    goes through torch.export); falls back to the TorchScript exporter where that fails (a
    ScriptModule, for one). Returns which exporter wrote it."""
    with torch.no_grad():
        try:
            torch.onnx.export(model, inputs, path, dynamo=True, verbose=False)
            return "dynamo"
        except Exception:  # noqa: BLE001  the fallback exporter is what such users get
            torch.onnx.export(model, inputs, path, dynamo=False)
            return "torchscript"


def onnxruntime_session(model, inputs: tuple, directory: str, profile: bool = False):
    """(session, exporter): ONNX Runtime on `model` exported into `directory`; CPU execution
    provider, every graph optimization, intra-op threads as many as torch's and not spinning (a
    spinning pool would take the cores from whatever runs after it). `profile` turns on its
    profiler, which writes its JSON into `directory` at session.end_profiling()."""
    import onnxruntime as ort

    path = os.path.join(directory, "model.onnx")
    exporter = export_onnx(model, inputs, path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(directory, "onnxruntime_profile")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session, exporter


def onnxruntime_feed(session, inputs: tuple) -> dict:
    """The inputs by the session's input names, as numpy views of the tensors."""
    return {i.name: a.numpy() for i, a in zip(session.get_inputs(), inputs)}
