"""The `kiln` command-line tool: explain, run, profile, and clear errors for bad arguments."""
import json
import os
import subprocess
import sys

import pytest


def cli(kiln_cli, *args, env=None):
    return subprocess.run([kiln_cli, *args], capture_output=True, text=True, timeout=300, env=env)


def input_args(specs):
    return [a for spec in specs for a in ("--input", spec)]


def test_run_matches_libtorch_on_every_test_model(kiln_cli, build_dir, models):
    for name, info in models.items():
        result = cli(kiln_cli, "run", str(build_dir / "models" / f"{name}.pt"),
                     *input_args(info["inputs"]), "--iters", "3")
        assert result.returncode == 0, (name, result.stderr)
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["max_abs_diff"] <= 1e-4, (name, report)
        assert report["kiln_ms"] > 0 and report["reference_ms"] > 0


def test_explain_static_model_has_no_interpreter_nodes(kiln_cli, build_dir):
    result = cli(kiln_cli, "explain", str(build_dir / "models" / "mlp.pt"), "--input", "8x64", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["interpreter"] == 0
    # The three linears (batch 8) on oneDNN through ATen's dispatcher, the gelu and the relu
    # inside the first two, the log_softmax in a generated kernel.
    assert report["extern"] == 3
    assert report["fused_kernels"] >= 1
    assert report["extern"] + report["kernels"] == report["nodes"]
    whys = [e["why"] for e in report["entries"]]
    assert any("with its gelu inside" in w for w in whys), whys
    assert any("with its relu inside" in w for w in whys), whys


def test_explain_text_names_where_control_flow_runs(kiln_cli, build_dir):
    result = cli(kiln_cli, "explain", str(build_dir / "models" / "control_flow.pt"),
                 "--input", "4x16", "--input", "int=3")
    assert result.returncode == 0, result.stderr
    assert "prim::Loop" in result.stdout and "TorchScript interpreter  control flow" in result.stdout
    assert "aten::linear" in result.stdout and "extern ATen" in result.stdout


def test_profile_times_every_step(kiln_cli, build_dir):
    model = str(build_dir / "models" / "cnn_traced.pt")
    text = cli(kiln_cli, "profile", model, "--input", "2x3x32x32", "--iters", "3", "--rows", "4")
    assert text.returncode == 0, text.stderr
    assert "3 calls" in text.stdout and "by category:" in text.stdout
    assert "convolution" in text.stdout and "more steps" in text.stdout
    result = cli(kiln_cli, "profile", model, "--input", "2x3x32x32", "--iters", "3", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["calls"] == 3 and report["steps"]
    assert all(step["runs"] == 3 for step in report["steps"])
    assert report["steps_ms"] <= report["call_ms"]


def test_profile_with_peers_puts_them_side_by_side(kiln_cli, build_dir):
    """OpenVINO and ONNX Runtime are in the project's environment: both must run."""
    env = dict(os.environ, KILN_PYTHON=sys.executable)
    result = cli(kiln_cli, "profile", str(build_dir / "models" / "cnn_traced.pt"),
                 "--input", "2x3x32x32", "--iters", "3", "--peers", env=env)
    assert result.returncode == 0, result.stderr
    assert "OpenVINO f32 (" in result.stdout and "ONNX Runtime (" in result.stdout, result.stdout
    assert "side by side" in result.stdout and "layer by layer" in result.stdout
    # Both convolutions of the CNN are matched in both peers.
    assert "(OpenVINO f32 2, ONNX Runtime 2 of kiln's 2 matched)" in result.stdout, result.stdout


def test_a_bf16_profile_puts_openvino_at_its_default_precision_beside_it(kiln_cli, build_dir):
    env = dict(os.environ, KILN_PYTHON=sys.executable)
    result = cli(kiln_cli, "profile", str(build_dir / "models" / "cnn_traced.pt"),
                 "--input", "2x3x32x32", "--iters", "2", "--peers", "--options", "precision=bf16",
                 env=env)
    assert result.returncode == 0, result.stderr
    assert "OpenVINO default (" in result.stdout and "OpenVINO f32" not in result.stdout


def test_profile_peers_without_a_python_says_so(kiln_cli, build_dir):
    env = dict(os.environ, KILN_PYTHON="/nonexistent/python")
    result = cli(kiln_cli, "profile", str(build_dir / "models" / "mlp.pt"), "--input", "8x64",
                 "--iters", "1", "--peers", env=env)
    assert result.returncode == 1
    assert "kiln: 1 calls" in result.stdout  # kiln's own profile still printed
    assert "set KILN_PYTHON" in result.stderr


@pytest.mark.parametrize("args, code, message", [
    ([], 2, "no command given"),
    (["frob", "m.pt"], 2, "unknown command 'frob'; allowed: explain, run, profile, cache"),
    (["cache"], 2, "cache takes one action: info or clear"),
    (["cache", "purge"], 2, "cache takes one action: info or clear"),
    (["profile", "m.pt", "--rows", "0"], 2, "--rows '0': must be an integer from 1 to 1000000"),
    (["run"], 2, "no model file given"),
    (["run", "missing.pt", "--input", "2x2"], 2, "cannot load 'missing.pt' as a TorchScript module"),
    (["run", "m.pt", "--input", "2by2"], 2, "the shape must be sizes joined by 'x'"),
    (["run", "m.pt", "--input", "2x2:float8"], 2, "unknown dtype 'float8'; allowed: float32"),
    (["run", "m.pt", "--iters", "0"], 2, "--iters '0': must be an integer from 1 to 1000000"),
    (["run", "m.pt", "--fast"], 2, "unknown flag '--fast'"),
    (["run", "m.pt", "--input"], 2, "--input needs a value"),
])
def test_bad_arguments_exit_2_with_a_message(kiln_cli, args, code, message):
    result = cli(kiln_cli, *args)
    assert result.returncode == code
    assert message in result.stderr
    assert ("usage:" in result.stderr) == ("cannot load" not in message)


def test_bad_options_are_named(kiln_cli, build_dir):
    result = cli(kiln_cli, "run", str(build_dir / "models" / "mlp.pt"), "--input", "8x64",
                 "--options", "speed=fast")
    assert result.returncode == 1
    assert "unknown option 'speed'; valid options: mode, target" in result.stderr


def test_wrong_number_of_inputs_is_a_clear_error(kiln_cli, build_dir):
    result = cli(kiln_cli, "run", str(build_dir / "models" / "mlp.pt"), "--input", "8x64",
                 "--input", "8x64")
    assert result.returncode == 1
    assert "wrong number of inputs: forward(x: Tensor) takes 1, got 2" in result.stderr


def test_a_file_that_is_not_a_model(kiln_cli, tmp_path):
    bogus = tmp_path / "bogus.pt"
    bogus.write_text("not a zip archive")
    result = cli(kiln_cli, "explain", str(bogus), "--input", "2x2")
    assert result.returncode == 2
    assert "cannot load" in result.stderr


def test_cache_info_and_clear(kiln_cli, build_dir, tmp_path):
    # Compiling a model through `run` fills a cache of its own; `cache clear` empties it.
    env = {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")}
    model = os.path.join(build_dir, "models", "mlp.pt")
    assert cli(kiln_cli, "run", model, "--input", "8x64", "--iters", "1", env=env).returncode == 0
    info = cli(kiln_cli, "cache", "info", env=env)
    assert info.returncode == 0 and f"dir: {tmp_path / 'cache'}" in info.stdout
    assert "entries: 0 " not in info.stdout and "entries: " in info.stdout, info.stdout
    cleared = cli(kiln_cli, "cache", "clear", env=env)
    assert cleared.returncode == 0 and "entries: 0 (0.0 MB of 1024 MB)" in cleared.stdout
    off = cli(kiln_cli, "cache", "info", env={**env, "KILN_CACHE": "0"})
    assert off.returncode == 0 and "off: KILN_CACHE=0" in off.stdout
