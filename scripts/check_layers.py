#!/usr/bin/env python3
"""The layer rule, written once and checked over every `#include "..."` of kiln's sources.

kiln's includes are root-relative ("passes/ir/graph.h"), so per-target include paths cannot stop
an upward include; this check does. Each source file belongs to a layer (by its path); a layer may
include its own headers, the base (the public error type, kiln/error.h) and the layers LAYERS
lists for it. Includes that break the rule today are listed in KNOWN, each to be removed as the
code moves; a new one fails the check, and so does a KNOWN entry that no longer occurs.

    python scripts/check_layers.py [ROOT]    # exit 0: clean; 1: the violations, one a line
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

BASE = {"kiln/error.h"}
PUBLIC = "public"  # backend/include/kiln: the API (kiln.h, options.h, explain.h, stats.h)
# The calling convention between generated kernels and the executor: a contract of its own that
# the code generators and the runtime both include, and that includes nothing of kiln.
ABI = "runtime/kernel_abi"

# layer -> the layers it may include (besides itself and BASE). Bottom to top.
LAYERS = {
    "passes/ir": [],
    "passes/kernel": ["passes/ir"],
    "passes": ["passes/ir", "passes/kernel"],
    # The engines that load generated code; each code generator hands its engine what it made.
    ABI: [],
    "runtime/jit": [],
    "runtime/cuda": [ABI],
    "codegen/llvm": ["passes/ir", "passes/kernel", "runtime/jit", ABI],
    "codegen/cuda": ["passes/ir", "passes/kernel", "runtime/cuda", ABI],
    # Plans and the executor: ATen and the IRs' types, the engines that run kernels.
    "runtime": ["passes/ir", "passes/kernel", "runtime/jit", "runtime/cuda", ABI],
    # The TorchScript frontend.
    "backend/capture": ["passes/ir"],
    # The driver: everything below it, and the public API it implements.
    "backend/api": ["passes/ir", "passes/kernel", "passes", ABI, "runtime/jit", "runtime/cuda",
                    "codegen/llvm", "codegen/cuda", "runtime", "backend/capture", PUBLIC],
    "backend/cli": [PUBLIC],
    "bindings": [PUBLIC, "backend/api"],
    PUBLIC: [],
}

# (file, included header) pairs that break the rule today, to be removed as the code moves: the
# torch <-> IR bridge lives in the runtime, which the frontend should not reach into; the plan
# builder takes the memory plan's type from a pass; kiln._C reaches past the API.
KNOWN = {
    ("backend/capture/import_graph.cpp", "runtime/tensor_bridge.h"),
    ("backend/capture/import_ops.cpp", "runtime/tensor_bridge.h"),
    ("backend/capture/partition.cpp", "runtime/tensor_bridge.h"),
    ("runtime/in_place_extern.h", "passes/plan_memory.h"),
    ("runtime/plan_builder.h", "passes/plan_memory.h"),
    ("bindings/src/fx_program.cpp", "backend/capture/partition.h"),
    ("bindings/src/fx_program.cpp", "runtime/tensor_bridge.h"),
    ("bindings/src/fx_program.h", "backend/capture/size_expression.h"),
    ("bindings/src/module.cpp", "backend/codegen/cuda/compile_cuda_kernels.h"),
    ("bindings/src/module.cpp", "passes/kernel/lower_ops.h"),
    ("bindings/src/module.cpp", "passes/pipeline.h"),
    ("bindings/src/module.cpp", "runtime/cuda/nvrtc.h"),
}

CHECKED_TOP = ("passes/", "runtime/", "backend/", "bindings/")


def layer_of(path: str) -> str | None:
    parts = path.split("/")
    if path == "runtime/kernel_abi.h":
        return ABI
    if path.startswith("kiln/") or path.startswith("backend/include/"):
        return PUBLIC
    if parts[0] == "backend" and len(parts) > 2:
        return "codegen/" + parts[2] if parts[1] == "codegen" else "backend/" + parts[1]
    if parts[0] == "passes":
        return "passes/" + parts[1] if parts[1] in ("ir", "kernel") and len(parts) > 2 else "passes"
    if parts[0] == "runtime":
        return "runtime/" + parts[1] if parts[1] in ("jit", "cuda") and len(parts) > 2 else "runtime"
    if parts[0] == "bindings":
        return "bindings"
    return None


def source_files(root: pathlib.Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "*.cpp", "*.h"], cwd=root, capture_output=True, text=True, check=True)
    return [f for f in listed.stdout.split() if f.startswith(CHECKED_TOP)]


def violations(root: pathlib.Path, files: list[str], known=frozenset(KNOWN)) -> list[str]:
    found, seen_known = [], set()
    for name in files:
        source = layer_of(name)
        if source is None:
            continue
        allowed = set(LAYERS[source]) | {source}
        for number, line in enumerate((root / name).read_text().splitlines(), 1):
            match = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not match:
                continue
            header = match.group(1)
            target = layer_of(header)
            if header in BASE or target is None or target in allowed:
                continue
            if (name, header) in known:
                seen_known.add((name, header))
                continue
            found.append(f"{name}:{number}: {source} may not include {header} ({target}); "
                         f"{source} may include: {', '.join(sorted(allowed)) or 'nothing else'}")
    for name, header in sorted(set(known) - seen_known):
        found.append(f"{name}: no longer includes {header}: remove the pair from KNOWN in "
                     f"scripts/check_layers.py")
    return found


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    found = violations(root, source_files(root))
    for line in found:
        print(line)
    if not found:
        print("layers: ok")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
