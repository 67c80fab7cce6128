"""Options from Python, validated by the same C++ CompileOptions that C++ users get.

The keys are CompileOptions' (mode, target, strict, fusion, max_specializations, precision,
dump_dir).
Values may be given as Python values (True, 8, "cpu") or as the strings C++ reads.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import _C
from ._errors import KilnError


def _as_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise KilnError(
        f"option '{key}' has a value of type {type(value).__name__}; "
        "options take a bool, an int or a string"
    )


def normalize(options: Mapping[str, Any] | None = None, mode: str | None = None) -> dict[str, str]:
    """A validated copy of ``options`` as strings, with torch.compile's ``mode`` folded in.

    Raises KilnError naming the key for an unknown key or a bad value; the caller's mapping is
    never changed.
    """
    if options is not None and not isinstance(options, Mapping):
        raise KilnError(f"options must be a dict, got {type(options).__name__}")
    values = {str(k): _as_text(str(k), v) for k, v in dict(options or {}).items()}
    if mode is not None:
        if "mode" in values and values["mode"] != mode:
            raise KilnError(f"mode is given twice: mode='{mode}' and options['mode']='{values['mode']}'")
        values["mode"] = str(mode)
    _C.normalize_options(values)  # raises for an unknown key or a bad value
    return values


def keys() -> list[str]:
    """The option keys kiln accepts."""
    return list(_C.option_keys())
