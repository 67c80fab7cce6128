"""The bench suite's runner on one small case: the JSON the README and outside checks read has
the documented shape, and correctness is checked on every row. (Speed is never asserted.)"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROW_KEYS = {"model", "backend", "median_ms", "min_ms", "max_ms", "speedup_vs_eager", "compile_s",
            "max_abs_diff", "ok", "error"}


def test_bench_writes_the_documented_json(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--cases", "mlp_b1,train_mlp_b8",
         "--backends", "kiln,torchscript", "--budget", "0.3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((tmp_path / "latest.json").read_text())
    assert {"machine", "versions", "threads", "results", "geomean"} <= set(data)
    assert set(data["geomean"]) == {"kiln_vs_eager", "kiln_vs_inductor"}
    assert data["versions"]["torch"].startswith("2.11")
    rows = {(r["model"], r["backend"]): r for r in data["results"]}
    assert set(rows) == {("mlp_b1", "eager"), ("mlp_b1", "kiln"), ("mlp_b1", "torchscript"),
                         ("train_mlp_b8", "eager"), ("train_mlp_b8", "kiln")}
    for row in data["results"]:
        assert set(row) == ROW_KEYS
        assert row["ok"], row
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["max_abs_diff"] <= 1e-4
    assert rows[("mlp_b1", "eager")]["speedup_vs_eager"] == 1.0
    assert data["geomean"]["kiln_vs_eager"] is not None
    assert (tmp_path / "latest.png").stat().st_size > 1000
    assert len(list(tmp_path.glob("quick-*.json"))) == 1
    assert "mlp_b1" in result.stdout and "geomean" in result.stdout


def test_a_failing_backend_gets_a_row_that_says_why(tmp_path):
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from bench.suite import measure, zoo\n"
        "case = next(c for c in zoo.CASES if c.name == 'mlp_b1')\n"
        "rows = measure.run_case(case, ['eager', 'no_such_backend'], 0.1, lambda s: None)\n"
        "bad = rows[1]\n"
        "assert not bad['ok'] and 'unknown backend' in bad['error'], bad\n"
        "assert bad['speedup_vs_eager'] is None\n"
        "assert rows[0]['ok']\n"
    ) % str(ROOT)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
