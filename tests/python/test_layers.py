"""The layer rule (scripts/check_layers.py) holds over kiln's sources, and the check catches an
upward include and a stale exception."""

import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)


def _tree(tmp_path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return list(files)


def test_kilns_sources_follow_the_layer_rule():
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert "layers: ok" in result.stdout


def test_an_upward_include_fails_and_says_what_is_allowed(tmp_path):
    files = _tree(tmp_path, {
        "passes/ir/graph.h": '#include "kiln/error.h"\n#include "runtime/executor.h"\n',
        "backend/codegen/llvm/emit.cpp": '#include "passes/kernel/kernel.h"\n'
                                         '#include "backend/api/compile_graph.h"\n',
    })
    found = check_layers.violations(tmp_path, files, known=frozenset())
    assert len(found) == 2, found
    assert found[0].startswith("passes/ir/graph.h:2: passes/ir may not include runtime/executor.h")
    assert "codegen/llvm may not include backend/api/compile_graph.h" in found[1]
    assert "passes/kernel" in found[1]  # the allowed layers are listed


def test_the_base_includes_nothing_above_it_and_the_frontends_reach_only_the_bridge(tmp_path):
    files = _tree(tmp_path, {
        "passes/base/environment.cpp": '#include "passes/pipeline.h"\n',
        "backend/capture/import_ops.cpp": '#include "runtime/bridge/tensor_bridge.h"\n'
                                          '#include "runtime/executor.h"\n',
    })
    found = check_layers.violations(tmp_path, files, known=frozenset())
    assert len(found) == 2, found
    assert "passes/base may not include passes/pipeline.h" in found[0]
    assert "backend/capture may not include runtime/executor.h (runtime)" in found[1]


def test_allowed_includes_pass(tmp_path):
    files = _tree(tmp_path, {
        "runtime/executor.cpp": '#include "runtime/kernel_abi.h"\n#include "passes/ir/graph.h"\n',
        "backend/codegen/cuda/emit.cpp": '#include "runtime/kernel_abi.h"\n'
                                         '#include "runtime/cuda/nvrtc.h"\n',
        "backend/api/driver.cpp": '#include "kiln/kiln.h"\n#include "passes/pipeline.h"\n',
        "runtime/plan_builder.h": '#include "passes/plan_memory.h"\n'
                                  '#include "runtime/bridge/tensor_bridge.h"\n',
        "backend/cli/main.cpp": '#include "kiln/kiln.h"\n#include "passes/base/strings.h"\n',
    })
    assert check_layers.violations(tmp_path, files, known=frozenset()) == []


def test_a_known_exception_that_no_longer_occurs_fails(tmp_path):
    files = _tree(tmp_path, {"runtime/plan_builder.h": '#include "passes/ir/graph.h"\n'})
    found = check_layers.violations(
        tmp_path, files, known=frozenset({("runtime/plan_builder.h", "passes/plan_memory.h")}))
    assert found == ["runtime/plan_builder.h: no longer includes passes/plan_memory.h: remove the "
                     "pair from KNOWN in scripts/check_layers.py"]
