"""Running test code in a fresh Python process: kiln reads its environment (KILN_DISABLE) once per
process, so switching a pass off needs a new one."""

import os
import subprocess
import sys


def run_child(code: str, disabled: str = "", timeout: int = 300) -> str:
    """Runs `code` with KILN_DISABLE=`disabled`; asserts it succeeded and returns its stdout."""
    env = {**os.environ, "KILN_DISABLE": disabled, "KILN_LOG": "error"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
