"""kiln.save / kiln.load: a compiled model in one file, with the machine code of the input
signatures it compiled, so that another process (or a C++ program, ``kiln::load``) runs it
without generating code. The file holds a TorchScript module: a CompiledScriptModule is saved
as it is; a model compiled with torch.compile (or a plain ``nn.Module``) is traced first."""

from __future__ import annotations

import os

import torch

from . import _C
from ._errors import KilnError
from ._wrapper import CompiledScriptModule, unwrap


def save(compiled, path, example_inputs=None) -> None:
    """Writes ``compiled`` to ``path``: its TorchScript module, options, the input signatures it
    has compiled and their code for this CPU and kiln build.

    ``compiled`` is a ``kiln.compile``d ScriptModule (call it first, or pass ``example_inputs``),
    or a model compiled with ``torch.compile(..., backend="kiln")`` / ``kiln.compile`` or a plain
    ``nn.Module``: those are traced with ``torch.jit.trace`` on ``example_inputs`` (required
    then), so they qualify when tracing captures them (tensor inputs and outputs, no
    data-dependent control flow), and compiled with the same options.
    """
    if example_inputs is not None and not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    if not isinstance(compiled, CompiledScriptModule):
        module, kwargs = unwrap(compiled)
        if not isinstance(module, torch.nn.Module):
            raise KilnError(f"kiln.save takes a compiled model or an nn.Module, got "
                            f"{type(compiled).__name__}")
        if example_inputs is None:
            raise KilnError("kiln.save of a model that is not a TorchScript module traces it: "
                            "pass example_inputs (a tuple of its inputs)")
        kwargs = kwargs or {"backend": "kiln"}
        with torch.no_grad():
            traced = torch.jit.trace(module, tuple(example_inputs))
        compiled = CompiledScriptModule(traced, {k: v for k, v in kwargs.items()
                                                 if k in ("backend", "mode", "options")})
    if example_inputs is not None:
        compiled(*example_inputs)
    compiled._compiled.save(os.fspath(path))


def load(path) -> CompiledScriptModule:
    """The model a package holds, compiled already: from the package's code on the CPU and kiln
    build it was saved with (nothing is generated), else compiled here with one warning."""
    loaded = _C.load_package(os.fspath(path))
    options = dict(item.split("=", 1) for item in loaded.options.split(",") if item)
    return CompiledScriptModule._loaded({"backend": "kiln", "options": options}, loaded)
