"""Every Python example under examples/python runs to the end in a fresh process (each checks
its own results against eager and exits non-zero when they differ)."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "python").glob("*.py"))


def test_there_are_examples():
    assert EXAMPLES, "examples/python holds no example"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(example, tmp_path):
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)
    assert result.returncode == 0, f"{example.name}\n{result.stdout}\n{result.stderr[-4000:]}"
