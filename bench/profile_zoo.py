"""`make bench-profile`: kiln.profile on zoo models, with OpenVINO's and ONNX Runtime's profilers
beside kiln's (docs/profiling.md). Writes one text report and one JSON per model into --out;
prints the reports.

    python bench/profile_zoo.py [--cases a,b] [--calls N] [--threads N] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import kiln  # noqa: E402
from bench.suite import zoo  # noqa: E402

DEFAULT_CASES = "resnet50_b1,mobilenet_v3_large_b1,convnext_tiny_b1,vit_tiny_b1"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=DEFAULT_CASES, help="zoo case names, comma-separated")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rows", type=int, default=15)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "profiles"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    by_name = {case.name: case for case in zoo.CASES}
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in by_name or by_name[n].training]
    if unknown:
        inference = ", ".join(c.name for c in zoo.CASES if not c.training)
        parser.error(f"unknown or training cases: {', '.join(unknown)}; allowed: {inference}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        model, inputs = by_name[name].build()
        report = kiln.profile(model.eval(), *inputs, calls=args.calls, rows=args.rows)
        (out / f"{name}.txt").write_text(report.text)
        (out / f"{name}.json").write_text(report.to_json())
        print(f"=== {name} ({args.threads} threads)\n{report.text}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
