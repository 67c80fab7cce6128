"""`make bench`: the model zoo (bench/suite/zoo.py) under eager, kiln (torch.compile and the C++
TorchScript path), Inductor, TorchScript and OpenVINO, in one process with a fixed thread count,
interleaved rounds, and ratios from the same run. Prints the table; writes
bench/results/latest.json, a timestamped copy and latest.png.

    python bench/run.py [--suite quick|full] [--threads N] [--budget S] [--cases a,b] [--backends a,b]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.suite import backends, measure, report, zoo  # noqa: E402


class Progress:
    """One status line on stderr: [done/total] what is running, elapsed time."""

    def __init__(self, total: int):
        self.total, self.done, self.start = total, 0, time.time()

    def __call__(self, what: str) -> None:
        bar = "#" * int(20 * self.done / max(self.total, 1))
        sys.stderr.write(f"\r[{bar:<20}] {self.done}/{self.total} {time.time() - self.start:5.0f} s  "
                         f"{what[:70]:<70}")
        sys.stderr.flush()

    def advance(self) -> None:
        self.done += 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["quick", "full"], default="quick")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of timed iterations per case (default: 6 quick, 8 full)")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--backends", default="", help="comma-separated backends (default: all)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--debug", action="store_true", help="print backend tracebacks")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    cases = zoo.cases(args.suite)
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if c.name in wanted]
    budget = args.budget or (6.0 if args.suite == "quick" else 8.0)
    chosen = set(filter(None, args.backends.split(",")))

    progress = Progress(len(cases))
    results = []
    started = time.time()
    for case in cases:
        names = backends.TRAINING if case.training else backends.INFERENCE
        if chosen:
            names = [n for n in names if n == "eager" or n in chosen]
        results += measure.run_case(case, names, budget, progress)
        progress.advance()
        progress("done")
    sys.stderr.write("\n")

    data = {"suite": args.suite, "machine": report.machine(args.threads),
            "versions": backends.versions(), "threads": args.threads,
            "seconds": round(time.time() - started, 1), "results": results,
            "geomean": report.geomeans(results)}
    m = data["machine"]
    print(f"machine: {m['cpu']} ({', '.join(m['isa'])}), {m['cores']} cores, {args.threads} threads")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in data["versions"].items()))
    print(report.table(results))
    g = data["geomean"]
    print(f"geomean over ok rows: kiln vs eager {report._fmt(g['kiln_vs_eager'], '.2f')}x, "
          f"kiln vs inductor {report._fmt(g['kiln_vs_inductor'], '.2f')}x "
          f"({data['seconds']:.0f} s)")
    path = report.write(pathlib.Path(args.out), data)
    print(f"wrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
