"""The backends a case runs under. Each turns (model, inputs) into a no-argument callable that
runs one iteration: an inference call, or a training step (forward, loss, backward, SGD)."""

from __future__ import annotations

import copy
import subprocess

import torch

from . import native_peers

# Backends in table order. kiln_ts is kiln's C++ TorchScript path (a traced module through
# kiln::compile); torchscript is torch.jit.freeze + torch.jit.optimize_for_inference. The peers
# run through their own APIs (native_peers.py): openvino_f32 and openvino (OpenVINO's default
# precision, bf16 where the CPU has it), onnxruntime; kiln_bf16 is torch.compile with kiln's
# precision="bf16", beside OpenVINO's default, and kiln_ts_bf16 the same mode on kiln's
# TorchScript path (no dynamo in the call, as OpenVINO's API has none). Inductor runs in its default
# configuration, with freezing, and (full suite only: 20-50 s of compile per model) with
# freezing and max-autotune.
INFERENCE = ["eager", "kiln", "kiln_ts", "inductor", "inductor_freeze", "torchscript",
             "openvino_f32", "openvino", "kiln_bf16", "kiln_ts_bf16", "onnxruntime"]
FULL_ONLY = ["inductor_max_autotune", "kiln_ts_in_dynamo"]
TRAINING = ["eager", "kiln", "inductor"]  # the TorchScript and native peers are inference-only

# Backends that compute in reduced precision by default: judged by norm-relative error.
REDUCED_PRECISION = ("openvino", "kiln_bf16", "kiln_ts_bf16")
# The TorchScript backends: a model that does not trace gets an error row for them.
TRACED = ("kiln_ts", "kiln_ts_bf16", "torchscript", "kiln_ts_in_dynamo")

# The f32 peers: per model, the faster of them that matches eager is its best peer.
F32_PEERS = ("openvino_f32", "onnxruntime")
INDUCTOR_CONFIGS = ("inductor", "inductor_freeze", "inductor_max_autotune")


def inference_backends(suite: str) -> list[str]:
    return INFERENCE + (FULL_ONLY if suite == "full" else [])


def _trace(model, inputs):
    with torch.no_grad():
        return torch.jit.trace(model, inputs, check_trace=False)


def _kiln_ts_in_dynamo(model: torch.nn.Module, inputs: tuple):
    """torch.compile with a backend that ignores the graph dynamo hands it and runs the kiln_ts
    module on the case's own inputs. Dynamo still does everything it does for any backend on every
    call: evaluates its guards, fetches the parameters it lifted into graph inputs, passes them
    through its wrappers. Valid only for the inputs it was built with (the bench's)."""
    import kiln
    module = kiln.compile(_trace(model, inputs))

    def backend(gm: torch.fx.GraphModule, example_inputs):
        outputs = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])

        def run(*args):
            out = module(*inputs)
            out = out if isinstance(out, tuple) else (out,)
            if len(out) != outputs:
                raise RuntimeError(f"kiln_ts_in_dynamo: the graph returns {outputs} values, "
                                   f"the traced module {len(out)}")
            return out

        return run

    return torch.compile(model, backend=backend, dynamic=False)


def compiled_model(backend: str, model: torch.nn.Module, inputs: tuple):
    """The model as `backend` runs it (compiling is lazy for the torch.compile backends)."""
    if backend == "eager":
        return model
    if backend == "kiln":
        return torch.compile(model, backend="kiln", dynamic=False)
    if backend == "kiln_bf16":
        return torch.compile(model, backend="kiln", dynamic=False, options={"precision": "bf16"})
    if backend in ("kiln_ts", "kiln_ts_bf16"):
        import kiln
        options = {"precision": "bf16"} if backend == "kiln_ts_bf16" else {}
        return kiln.compile(_trace(model, inputs), options=options)
    if backend == "kiln_ts_in_dynamo":
        return _kiln_ts_in_dynamo(model, inputs)
    if backend == "inductor":
        return torch.compile(model, dynamic=False)
    if backend == "torchscript":
        return torch.jit.optimize_for_inference(torch.jit.freeze(_trace(model, inputs)))
    if backend == "inductor_freeze":
        return torch.compile(model, dynamic=False, options={"freezing": True})
    if backend == "inductor_max_autotune":
        return torch.compile(model, dynamic=False, options={"freezing": True, "max_autotune": True})
    if backend in ("openvino_f32", "openvino"):
        return native_peers.openvino(model, inputs, f32=backend == "openvino_f32")
    if backend == "onnxruntime":
        return native_peers.onnxruntime(model, inputs)
    raise ValueError(f"unknown backend {backend}")


def inference_step(backend: str, model: torch.nn.Module, inputs: tuple):
    model = copy.deepcopy(model).eval()
    runner = compiled_model(backend, model, inputs)

    def step():
        with torch.no_grad():
            return runner(*inputs)

    exporter = getattr(runner, "exporter", None)
    step.note = f"exported by torch.onnx's {exporter} exporter" if exporter else None
    return step


def training_step(backend: str, model: torch.nn.Module, inputs: tuple):
    """A step function and the module whose parameters it updates."""
    model = copy.deepcopy(model).train()
    runner = compiled_model(backend, model, inputs)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = runner(*inputs).square().mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, model


def versions() -> dict:
    import importlib.metadata as md
    result = {"torch": torch.__version__}
    for package in ("kiln", "torchvision", "transformers", "timm", "openvino", "onnxruntime",
                    "onnxscript"):
        try:
            result[package] = md.version(package)
        except md.PackageNotFoundError:
            result[package] = None
    # kiln links Debian's llvm-19 static archives at build time: the version is that package's.
    try:
        result["llvm"] = subprocess.run(["llvm-config-19", "--version"], capture_output=True,
                                        text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        result["llvm"] = None
    return result
