"""Installs kiln into a prefix, builds examples/hello and examples/package against it with
find_package(kiln), runs them."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout}\n{result.stderr}"
    return result


def build_example(name: str, prefix, tmp_path):
    app_build = tmp_path / name
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if os.path.exists("/usr/bin/ccache") else []
    run("cmake", "-S", str(ROOT / "examples" / name), "-B", str(app_build), "-G", "Ninja",
        f"-DCMAKE_PREFIX_PATH={prefix}", *launcher)
    run("cmake", "--build", str(app_build))
    return app_build / name


def test_example_apps_build_against_installed_kiln_and_run(build_dir, tmp_path):
    prefix = tmp_path / "install"
    run("cmake", "--install", str(build_dir), "--prefix", str(prefix))
    assert (prefix / "lib" / "cmake" / "kiln" / "kilnConfig.cmake").exists()
    hello = build_example("hello", prefix, tmp_path)
    result = run(str(hello), str(build_dir / "models" / "mlp.pt"), "8x64")
    assert "kiln vs LibTorch max abs diff" in result.stdout
    assert "recompiled vs first compile max abs diff" in result.stdout

    # A package saved by one process runs in another that has no disk cache: nothing compiled.
    package = build_example("package", prefix, tmp_path)
    saved = tmp_path / "transformer.kiln"
    run(str(package), "save", str(build_dir / "models" / "transformer.pt"), "2x10x32", str(saved))
    result = run(str(package), "run", str(saved), "2x10x32", env={**os.environ, "KILN_CACHE": "0"})
    assert "kiln vs LibTorch max abs diff" in result.stdout
    assert "code modules compiled: 0, loaded: " in result.stdout
    assert "loaded: 0" not in result.stdout, result.stdout
