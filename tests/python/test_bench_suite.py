"""The bench suite's runner on one small case: the JSON the README and outside checks read has
the documented shape, and correctness is checked on every row. (Speed is never asserted.)"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROW_KEYS = {"model", "backend", "median_ms", "min_ms", "max_ms", "speedup_vs_eager", "compile_s",
            "max_abs_diff", "norm_rel_err", "ok", "error", "note"}
GEOMEANS = {"kiln_vs_eager", "kiln_vs_inductor", "kiln_vs_best_peer", "kiln_ts_vs_best_peer",
            "kiln_bf16_vs_openvino", "kiln_ts_bf16_vs_openvino"}


def test_bench_writes_the_documented_json(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--cases", "mlp_b1,train_mlp_b8",
         "--backends", "kiln,torchscript,openvino_f32,openvino,kiln_bf16,kiln_ts_bf16,onnxruntime",
         "--budget", "0.3",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((tmp_path / "latest.json").read_text())
    assert {"date", "machine", "versions", "threads", "results", "geomean", "sgemm_gflops",
            "gflop"} <= set(data)
    assert data["sgemm_gflops"] > 0
    # Inference cases only: three 256x256 linears, a multiply-add counted as two operations.
    assert data["gflop"] == {"mlp_b1": 3 * 2 * 256 * 256 / 1e9}
    assert set(data["geomean"]) == GEOMEANS
    assert data["versions"]["torch"].startswith("2.11")
    rows = {(r["model"], r["backend"]): r for r in data["results"]}
    assert set(rows) == {("mlp_b1", b) for b in ("eager", "kiln", "torchscript", "openvino_f32",
                                                 "openvino", "kiln_bf16", "kiln_ts_bf16",
                                                 "onnxruntime")} | {
        ("train_mlp_b8", "eager"), ("train_mlp_b8", "kiln")}
    for row in data["results"]:
        assert set(row) == ROW_KEYS
        assert row["ok"], row
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        if row["backend"] in ("openvino", "kiln_bf16", "kiln_ts_bf16"):  # by norm-relative error
            assert row["norm_rel_err"] <= 2e-2
        else:
            assert row["max_abs_diff"] <= 1e-4
    assert rows[("mlp_b1", "eager")]["speedup_vs_eager"] == 1.0
    assert "exporter" in rows[("mlp_b1", "onnxruntime")]["note"]
    # The best f32 peer is one of the two f32 peers, and the geomean against it is kiln's ratio.
    assert data["geomean"]["kiln_vs_eager"] is not None
    peers = [rows[("mlp_b1", b)]["median_ms"] for b in ("openvino_f32", "onnxruntime")]
    expected = min(peers) / rows[("mlp_b1", "kiln")]["median_ms"]
    assert abs(data["geomean"]["kiln_vs_best_peer"] - expected) < 1e-9
    bf16 = rows[("mlp_b1", "openvino")]["median_ms"] / rows[("mlp_b1", "kiln_bf16")]["median_ms"]
    assert abs(data["geomean"]["kiln_bf16_vs_openvino"] - bf16) < 1e-9
    ts_bf16 = rows[("mlp_b1", "openvino")]["median_ms"] / rows[("mlp_b1", "kiln_ts_bf16")][
        "median_ms"]
    assert abs(data["geomean"]["kiln_ts_bf16_vs_openvino"] - ts_bf16) < 1e-9
    assert "vs best f32 peer" in result.stdout
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


def _report(rows):
    return {"suite": "quick", "date": "DATE-STAMP", "seconds": 12.0, "threads": 2,
            "device": "cpu", "versions": {"torch": "2.11.0", "openvino": None},
            "machine": {"cpu": "Some CPU", "isa": ["avx2"], "cores": 2, "threads": 2,
                        "os": "Linux", "python": "3.11"},
            "results": rows,
            "geomean": {"kiln_vs_eager": 1.5, "kiln_vs_inductor": None, "kiln_vs_best_peer": 0.9}}


def _row(model, backend, median, ok=True, error=None):
    return {"model": model, "backend": backend, "median_ms": median, "min_ms": median,
            "max_ms": median, "speedup_vs_eager": (2.0 / median) if ok else None,
            "compile_s": 0.1, "max_abs_diff": 0.0, "norm_rel_err": 0.0, "ok": ok,
            "error": error, "note": None}


def test_bench_report_regenerates_the_page_and_the_readme_table(tmp_path):
    sys.path.insert(0, str(ROOT))
    from bench.report import publish
    from bench.suite import page
    source = tmp_path / "latest.json"
    source.write_text(json.dumps(_report([
        _row("resnet", "eager", 2.0), _row("resnet", "kiln", 1.0),
        _row("resnet", "openvino_f32", 0.9),
        _row("resnet", "onnxruntime", None, ok=False, error="IndexError: boom")])))
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{page.README_BEGIN}\nstale table\n{page.README_END}\nafter\n")
    publish(source, root=tmp_path)
    text = readme.read_text()
    assert "stale table" not in text and text.startswith("before\n") and text.endswith("after\n")
    assert "| resnet | 1.00 ms | 2.00x | - | 0.90x (openvino_f32) | - |" in text
    assert "**0.90x** the best f32 peer" in text
    markdown = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "DATE-STAMP" in markdown and "Some CPU" in markdown and "torch 2.11.0" in markdown
    # The geometric means come from the rows, by the current rules, not from the file's stale
    # "geomean" (1.5).
    assert "`IndexError: boom`" in markdown and "**2.00x** eager" in markdown
    publish(source, root=tmp_path)  # overwrites: the same inputs give the same files
    assert readme.read_text() == text
    assert (tmp_path / "docs" / "benchmarks.md").read_text() == markdown


def test_bench_report_refuses_a_readme_without_markers(tmp_path):
    sys.path.insert(0, str(ROOT))
    from bench.suite import page
    try:
        page.replace_readme_block("no markers here", "block")
    except ValueError as error:
        assert "markers" in str(error)
    else:
        raise AssertionError("a README without markers was accepted")


def test_the_bf16_geomean_counts_only_cases_with_products():
    sys.path.insert(0, str(ROOT))
    from bench.suite import report
    rows = [_row("softmax_4096x1024", "openvino", 4.0), _row("softmax_4096x1024", "kiln_bf16", 1.0),
            _row("mlp_b1", "openvino", 1.1), _row("mlp_b1", "kiln_bf16", 1.0)]
    # softmax has no convolution or matrix product: bf16 changes nothing there.
    assert report.bf16_vs_openvino(rows) == [1.1 / 1.0]
    rows += [_row("mlp_b1", "kiln_ts_bf16", 0.5)]
    assert report.bf16_vs_openvino(rows, "kiln_ts_bf16") == [1.1 / 0.5]
    # The page gives both entry points' figures.
    from bench.suite import page
    line = page._geomean_line({"results": rows})
    assert "**1.10x** OpenVINO at its default precision, kiln_ts **2.20x**" in line, line


def test_torch_compiles_entry_is_measured_around_kiln_ts(tmp_path):
    """kiln_ts_in_dynamo (full suite) runs the kiln_ts module under torch.compile: its result
    matches eager, and the summary reports its time less kiln_ts's as torch.compile's entry."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--suite", "full", "--cases", "mlp_b1",
         "--backends", "kiln,kiln_ts,kiln_ts_in_dynamo,onnxruntime", "--budget", "0.3",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads((tmp_path / "latest.json").read_text())
    rows = {r["backend"]: r for r in data["results"]}
    assert rows["kiln_ts_in_dynamo"]["ok"] and rows["kiln_ts_in_dynamo"]["max_abs_diff"] <= 1e-4
    sys.path.insert(0, str(ROOT))
    from bench.suite import report
    (summary,) = report.summaries(data["results"])
    entry = rows["kiln_ts_in_dynamo"]["median_ms"] - rows["kiln_ts"]["median_ms"]
    assert summary["dynamo_ms"] == entry
    assert summary["ts_vs_best_peer"] == (rows["onnxruntime"]["median_ms"]
                                          / rows["kiln_ts"]["median_ms"])


def test_the_page_shows_the_compute_rate_and_torch_compiles_entry(tmp_path):
    sys.path.insert(0, str(ROOT))
    from bench.suite import page
    data = _report([_row("resnet", "eager", 2.0), _row("resnet", "kiln", 1.0),
                    _row("resnet", "kiln_ts", 0.8), _row("resnet", "kiln_ts_in_dynamo", 0.95),
                    _row("resnet", "onnxruntime", 1.2), _row("tiny", "eager", 2.0),
                    _row("tiny", "kiln", 1.0)])
    data.update(sgemm_gflops=100.0, gflop={"resnet": 4.0, "tiny": 0.01})
    markdown = page.benchmarks_page(data, tmp_path / "latest.json", "chart.png")
    # 1.2 / 1.0 for kiln, 1.2 / 0.8 for kiln_ts, 0.95 - 0.8 ms for the entry.
    assert "| resnet | 1.00 ms | 2.00x | - | 1.20x (onnxruntime) | 1.50x | 0.150 ms |" in markdown
    assert "**100 GFLOP/s**" in markdown
    # 4 GFLOP in 2 ms and in 1 ms; a model under 0.1 GFLOP a call is left out.
    assert "| resnet | 4.00 | 2000 | 4000 | 2000% | 4000% |" in markdown
    assert "| tiny |" not in markdown.split("## Compute rate")[1].split("## Every row")[0]


def test_the_dynamic_shapes_bench_measures_a_stream_and_writes_its_page():
    """bench/dynamic_shapes.py: one child (eager generation, the quickest) gives the documented
    figures; the page puts kiln's steady pass against the others'."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dynamic_shapes.py"), "--child", "gpt2_generate",
         "eager"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    row = json.loads(line[len("RESULT "):])
    assert row["same_tokens"] is True and row["steady_s"] > 0 and row["dynamo_graphs"] == 0
    sys.path.insert(0, str(ROOT / "bench"))
    import dynamic_shapes
    base = {"calls": 50, "max_abs_diff": 0.0, "kiln_specializations": 3, "kiln_fallbacks": 0,
            "kiln_shape_classes": 1, "kiln_class_plans": 47, "kiln_compile_s": 1.5,
            "dynamo_graphs": 2, "first_pass_s": 9.0}
    rows = [dict(base, case="bert", backend="eager", steady_s=3.0),
            dict(base, case="bert", backend="kiln", steady_s=1.5),
            dict(base, case="bert", backend="inductor", steady_s=2.1),
            dict(base, case="bert", backend="kiln_bf16", steady_s=1.2),
            {"case": "gpt", "backend": "kiln", "error": "RuntimeError: boom"}]
    text = dynamic_shapes.page({"date": "D", "machine": "M", "threads": 2, "results": rows})
    assert "| bert | kiln | 9.00 s | 1.500 s | 3 (1) | 47 | 0 | 1.50 | 2 | 0.0e+00 | - |" in text
    assert "| bert | 2.00x | 1.40x | - | 2.50x |" in text
    assert "fails: `RuntimeError: boom`" in text
