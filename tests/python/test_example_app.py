"""Installs kiln into a prefix, builds examples/hello against it with find_package(kiln), runs it."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result


def test_example_app_builds_against_installed_kiln_and_runs(build_dir, tmp_path):
    prefix = tmp_path / "install"
    run("cmake", "--install", str(build_dir), "--prefix", str(prefix))
    assert (prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake").exists()
    app_build = tmp_path / "app"
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if os.path.exists("/usr/bin/ccache") else []
    run("cmake", "-S", str(ROOT / "examples" / "hello"), "-B", str(app_build), "-G", "Ninja",
        f"-DCMAKE_PREFIX_PATH={prefix}", *launcher)
    run("cmake", "--build", str(app_build))
    result = run(str(app_build / "hello"), str(build_dir / "models" / "mlp.pt"), "8x64")
    assert "kiln vs LibTorch max abs diff" in result.stdout
    assert "recompiled vs first compile max abs diff" in result.stdout
