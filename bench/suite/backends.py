"""The backends a case runs under. Each turns (model, inputs) into a no-argument callable that
runs one iteration: an inference call, or a training step (forward, loss, backward, SGD)."""

from __future__ import annotations

import copy
import subprocess

import torch

# Backends in table order. kiln_ts is kiln's C++ TorchScript path (a traced module through
# kiln::compile); torchscript is torch.jit.freeze + torch.jit.optimize_for_inference.
INFERENCE = ["eager", "kiln", "kiln_ts", "inductor", "torchscript", "openvino"]
TRAINING = ["eager", "kiln", "inductor"]  # the TorchScript and OpenVINO paths are inference-only


def _trace(model, inputs):
    with torch.no_grad():
        return torch.jit.trace(model, inputs, check_trace=False)


def compiled_model(backend: str, model: torch.nn.Module, inputs: tuple):
    """The model as `backend` runs it (compiling is lazy for the torch.compile backends)."""
    if backend == "eager":
        return model
    if backend == "kiln":
        return torch.compile(model, backend="kiln", dynamic=False)
    if backend == "kiln_ts":
        import kiln
        return kiln.compile(_trace(model, inputs))
    if backend == "inductor":
        return torch.compile(model, dynamic=False)
    if backend == "torchscript":
        return torch.jit.optimize_for_inference(torch.jit.freeze(_trace(model, inputs)))
    if backend == "openvino":
        import openvino.torch  # noqa: F401  registers the "openvino" torch.compile backend
        return torch.compile(model, backend="openvino", dynamic=False)
    raise ValueError(f"unknown backend {backend}")


def inference_step(backend: str, model: torch.nn.Module, inputs: tuple):
    model = copy.deepcopy(model).eval()
    runner = compiled_model(backend, model, inputs)

    def step():
        with torch.no_grad():
            return runner(*inputs)

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
    for package in ("kiln", "torchvision", "transformers", "timm", "openvino"):
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
