#!/usr/bin/env python3
"""The layer rule, written once and checked over every `#include "..."` of kiln's sources.

kiln's includes are root-relative ("passes/ir/graph.h"), so per-target include paths cannot stop
an upward include; this check does. Each source file belongs to a layer (by its path); a layer may
include its own headers, the base (passes/base, and the public kiln/error.h and kiln/export.h)
and the layers LAYERS lists for it. Includes that break the rule are listed in KNOWN while the
code moves (none today); a new one fails the check, and so does a KNOWN entry that no longer
occurs.

    python scripts/check_layers.py [ROOT]    # exit 0: clean; 1: the violations, one a line
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

# The bottom (passes/base: the environment and the log, string helpers, the export macro) and the
# public error type it throws: every layer may include these.
BASE_LAYER = "passes/base"
BASE = {"kiln/error.h", "kiln/export.h"}
PUBLIC = "public"  # backend/include/kiln: the API (kiln.h, options.h, explain.h, stats.h)
# The calling convention between generated kernels and the executor: a contract of its own that
# the code generators and the runtime both include, and that includes nothing of kiln.
ABI = "runtime/kernel_abi"

# layer -> the layers it may include (besides itself and the base). Bottom to top.
LAYERS = {
    BASE_LAYER: [],
    "passes/ir": [],
    "passes/kernel": ["passes/ir"],
    "passes": ["passes/ir", "passes/kernel"],
    # The engines that load generated code; each code generator hands its engine what it made.
    ABI: [],
    "runtime/jit": [],
    "runtime/cuda": [ABI],
    # The code generators' common interface (kernels in, compiled kernels out), and the two.
    "codegen": ["passes/ir", "passes/kernel", ABI],
    "codegen/llvm": ["passes/ir", "passes/kernel", "codegen", "runtime/jit", ABI],
    "codegen/cuda": ["passes/ir", "passes/kernel", "codegen", "runtime/cuda", ABI],
    # torch <-> graph IR: used by both frontends and by the runtime.
    "runtime/bridge": ["passes/ir"],
    # Plans and the executor: ATen, the IRs' types and the passes' results (the memory plan).
    "runtime": ["passes/ir", "passes/kernel", "passes", "runtime/bridge", ABI],
    # The TorchScript frontend and the passes over TorchScript graphs.
    "backend/capture": ["passes/ir", "runtime/bridge"],
    # The FX frontend: torch.compile's graphs, imported with the TorchScript frontend's importer.
    "backend/fx": ["passes/ir", "runtime/bridge", "backend/capture"],
    # The driver: everything below it, and the public API it implements.
    "backend/api": ["passes/ir", "passes/kernel", "passes", ABI, "runtime/jit", "runtime/cuda",
                    "runtime/bridge", "codegen", "codegen/llvm", "codegen/cuda", "runtime",
                    "backend/capture", "backend/fx", PUBLIC],
    "backend/cli": [PUBLIC],
    # The Python extension: the public API, the driver's regions and introspection, and the FX
    # frontend with the size expressions and tensor types its arguments are decoded into.
    "bindings": [PUBLIC, "backend/api", "backend/fx", "backend/capture", "runtime/bridge"],
    PUBLIC: [],
}

# (file, included header) pairs that break the rule today, to be removed as the code moves.
KNOWN: set[tuple[str, str]] = set()

CHECKED_TOP = ("passes/", "runtime/", "backend/", "bindings/")


def layer_of(path: str) -> str | None:
    parts = path.split("/")
    if path == "runtime/kernel_abi.h":
        return ABI
    if path.startswith("kiln/") or path.startswith("backend/include/"):
        return PUBLIC
    if parts[:2] == ["backend", "codegen"] and len(parts) == 3:
        return "codegen"  # the interface both code generators implement
    if parts[0] == "backend" and len(parts) > 2:
        return "codegen/" + parts[2] if parts[1] == "codegen" else "backend/" + parts[1]
    if parts[0] == "passes":
        in_sub = parts[1] in ("base", "ir", "kernel") and len(parts) > 2
        return "passes/" + parts[1] if in_sub else "passes"
    if parts[0] == "runtime":
        in_sub = parts[1] in ("jit", "cuda", "bridge") and len(parts) > 2
        return "runtime/" + parts[1] if in_sub else "runtime"
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
        allowed = set(LAYERS[source]) | {source, BASE_LAYER}
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
