"""Running test code in a fresh Python process: kiln reads its environment (KILN_DISABLE) once per
process, so switching a pass off needs a new one."""

import os
import subprocess
import sys


def run_child(code: str, disabled: str = "", timeout: int = 300, env: dict | None = None,
              stderr: bool = False) -> str:
    """Runs `code` with KILN_DISABLE=`disabled` and the variables in `env`; asserts it succeeded
    and returns its stdout (and its stderr after it, with `stderr`)."""
    variables = {**os.environ, "KILN_DISABLE": disabled, "KILN_LOG": "error", **(env or {})}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, env=variables)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout + (out.stderr if stderr else "")
