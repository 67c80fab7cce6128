"""kiln.compile / unwrap / recompile: the contract trainers (Lightning Fabric, MMEngine, your
own loop) rely on. The compiled object keeps the original module and the exact arguments it was
compiled with, so a trainer can unwrap it, wrap the module (DDP, FSDP), and compile again."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch._dynamo.eval_frame import OptimizedModule, innermost_backend

from . import _C, _options
from ._errors import KilnError

# torch.compile's keyword arguments; kiln.compile takes the same (backend is always kiln).
_COMPILE_KWARGS = ("fullgraph", "dynamic", "backend", "mode", "options", "disable")


def _check_kwargs(kwargs: dict) -> None:
    unknown = sorted(set(kwargs) - set(_COMPILE_KWARGS))
    if unknown:
        raise KilnError(f"unknown argument(s) {', '.join(unknown)} for kiln.compile; "
                        f"valid: {', '.join(_COMPILE_KWARGS)}")
    if kwargs.get("backend", "kiln") != "kiln":
        raise KilnError(f"kiln.compile compiles with backend='kiln', got backend={kwargs['backend']!r}")
    _options.normalize(kwargs.get("options"), kwargs.get("mode"))  # fail here, not at first call


def compile(model, **kwargs):
    """Compiles ``model`` with kiln; takes torch.compile's keyword arguments.

    For an ``nn.Module`` (or function) this is ``torch.compile(model, backend="kiln", **kwargs)``,
    a real ``torch._dynamo.OptimizedModule``; for a ``torch.jit.ScriptModule`` it is kiln's C++
    TorchScript path (a CompiledScriptModule). Either way the result carries
    ``_compile_kwargs``: the kwargs given, with ``backend="kiln"`` (what torch.compile was called
    with, so a trainer that re-applies ``torch.compile(wrapped, **_compile_kwargs)``, as Lightning
    Fabric does, compiles with kiln again), and ``kiln.unwrap`` returns the original module and
    them. ``disable=True`` returns ``model`` unchanged.
    """
    _check_kwargs(kwargs)
    if kwargs.get("disable", False):
        return model
    kwargs = {"backend": "kiln", **kwargs}
    if isinstance(model, torch.jit.ScriptModule):
        return CompiledScriptModule(model, kwargs)
    # torch.compile pops keys from the options dict it gets: it gets a copy.
    torch_kwargs = copy.deepcopy({k: v for k, v in kwargs.items() if k != "backend"})
    compiled = torch.compile(model, backend="kiln", **torch_kwargs)
    if isinstance(compiled, OptimizedModule):
        # OptimizedModule forwards attribute writes to the original module, which is what
        # deepcopy and pickle carry over (OptimizedModule.__reduce__ keeps only the module).
        compiled._compile_kwargs = copy.deepcopy(kwargs)
    else:  # a function: torch.compile returned a plain wrapper
        compiled._compile_kwargs = copy.deepcopy(kwargs)
        compiled._orig_mod = model
    return compiled


def unwrap(obj) -> tuple[Any, dict | None]:
    """``(original_module, kwargs)`` of a compiled object: the identical module object that was
    compiled, and the kwargs to compile it again with. For an object that is not compiled:
    ``(obj, None)``."""
    if isinstance(obj, CompiledScriptModule):
        return obj._orig_mod, copy.deepcopy(obj._compile_kwargs)
    if isinstance(obj, OptimizedModule):
        kwargs = getattr(obj, "_compile_kwargs", None)
        if kwargs is None:
            # Compiled by torch.compile itself: its backend wrapper knows mode and options.
            wrapper = innermost_backend(obj.dynamo_ctx.callback)
            kwargs = {"backend": getattr(wrapper, "compiler_name", "kiln"),
                      **getattr(wrapper, "kwargs", {})}
        return obj._orig_mod, copy.deepcopy(kwargs)
    if hasattr(obj, "_orig_mod") and hasattr(obj, "_compile_kwargs"):
        return obj._orig_mod, copy.deepcopy(obj._compile_kwargs)
    return obj, None


def recompile(module, kwargs: dict | None):
    """Compiles ``module`` again with the kwargs ``unwrap`` returned (None: as given, uncompiled)."""
    if kwargs is None:
        return module
    return compile(module, **kwargs)


class CompiledScriptModule:
    """A torch.jit.ScriptModule compiled by kiln's C++ TorchScript path (kiln::compile).

    Called like the module; attribute reads and writes reach the original; ``explain(*inputs)``
    says where each op runs. ``fullgraph`` and ``dynamic`` have no effect on this path.
    """

    def __init__(self, module: torch.jit.ScriptModule, kwargs: dict):
        values = _options.normalize(kwargs.get("options"), kwargs.get("mode"))
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compile_kwargs", copy.deepcopy(kwargs))
        object.__setattr__(self, "_compiled", _C.compile_script(module, values))

    @classmethod
    def _loaded(cls, kwargs: dict, compiled) -> "CompiledScriptModule":
        """One whose C++ module is ``compiled``, made by kiln.load: its ``_orig_mod`` is read
        from the package at first use (calls run without it)."""
        self = cls.__new__(cls)
        object.__setattr__(self, "_compile_kwargs", copy.deepcopy(kwargs))
        object.__setattr__(self, "_compiled", compiled)
        return self

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    forward = __call__

    @property
    def num_specializations(self) -> int:
        """Input signatures compiled so far."""
        return self._compiled.num_specializations

    def explain(self, *args, **kwargs) -> str:
        """Where each op runs for these inputs, as JSON (compiles them if needed)."""
        return self._compiled.explain(*args, **kwargs)

    def __getattr__(self, name: str):
        if name in ("_compiled", "_compile_kwargs"):
            raise AttributeError(name)
        if name == "_orig_mod":  # kiln.load's: read from the package now
            module = torch.jit._recursive.wrap_cpp_module(self._compiled.original)
            object.__setattr__(self, "_orig_mod", module)
            return module
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._orig_mod, name, value)

    def __deepcopy__(self, memo):
        return CompiledScriptModule(copy.deepcopy(self._orig_mod, memo), self._compile_kwargs)

    def __repr__(self) -> str:
        return f"CompiledScriptModule(kwargs={self._compile_kwargs!r}, module={self._orig_mod!r})"
