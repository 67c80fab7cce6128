"""`make bench`: the model zoo (bench/suite/zoo.py) under eager, kiln (torch.compile and the C++
TorchScript path), Inductor, TorchScript and OpenVINO, in one process with a fixed thread count,
interleaved rounds, and ratios from the same run. Prints the table; writes
bench/results/latest.json, a timestamped copy and latest.png; with --report also regenerates
docs/benchmarks.md, docs/benchmarks.png and README.md's table from them (bench/report.py).

    python bench/run.py [--suite quick|full] [--threads N] [--budget S] [--cases a,b] [--backends a,b]
                        [--device cpu|cuda] [--name latest] [--report]

With --device cuda (scripts/gpu-check) the cases run on the GPU, every timed call ends with a
synchronize, and the report adds the bandwidth of the fused elementwise chain next to a
device-to-device copy of the same size, measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
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


def _bandwidth() -> dict:
    """GB/s of a device-to-device copy and of the five-op elementwise chain under eager and kiln,
    over 256M floats (large enough that launch overheads vanish), each timed with CUDA events
    over back-to-back calls; medians of the same run. The chain reads and writes as many bytes as
    the copy."""
    import statistics
    x = torch.randn(256 * 1024 * 1024, device="cuda")
    y = torch.empty_like(x)
    chain = zoo.Chain()
    runners = {"copy": lambda: y.copy_(x), "eager": lambda: chain(x),
               "kiln": torch.compile(chain, backend="kiln", dynamic=False)}
    moved = 2 * x.numel() * x.element_size()
    result = {}
    with torch.no_grad():
        for name, run in runners.items():
            run()
            times = []
            for _ in range(15):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(5):
                    run()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 5)
            result[f"{name}_gbps"] = moved / (statistics.median(times) * 1e-3) / 1e9
    result["kiln_chain_vs_copy"] = result["kiln_gbps"] / result["copy_gbps"]
    result["eager_chain_vs_copy"] = result["eager_gbps"] / result["copy_gbps"]
    return result


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
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--name", default="latest", help="stem of the result files")
    parser.add_argument("--report", action="store_true",
                        help="regenerate docs/benchmarks.md, its chart and README.md's table")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but this PyTorch finds no GPU")
    measure.DEVICE = args.device
    warnings.filterwarnings("ignore")
    cases = zoo.cases(args.suite)
    if args.cases:
        wanted = set(args.cases.split(","))
        cases = [c for c in cases if c.name in wanted]
    budget = args.budget or (6.0 if args.suite == "quick" else 8.0)
    chosen = set(filter(None, args.backends.split(",")))

    progress = Progress(len(cases))
    results, gflop = [], {}
    started = time.time()
    progress("the machine's sgemm rate")
    sgemm = measure.sgemm_gflops() if args.device == "cpu" else None
    for case in cases:
        names = backends.TRAINING if case.training else backends.inference_backends(args.suite)
        if chosen:
            names = [n for n in names if n == "eager" or n in chosen]
        results += measure.run_case(case, names, budget, progress,
                                    gflop if args.device == "cpu" else None)
        progress.advance()
        progress("done")
    sys.stderr.write("\n")

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    data = {"suite": args.suite, "date": date, "machine": report.machine(args.threads),
            "versions": backends.versions(), "threads": args.threads,
            "seconds": round(time.time() - started, 1), "results": results,
            "geomean": report.geomeans(results), "device": args.device,
            "sgemm_gflops": sgemm, "gflop": gflop}
    if args.device == "cuda":
        data["bandwidth"] = b = _bandwidth()
        print(f"bandwidth (256M float32): copy {b['copy_gbps']:.0f} GB/s; elementwise chain: "
              f"kiln {b['kiln_gbps']:.0f} GB/s ({b['kiln_chain_vs_copy']:.2f} of the copy), "
              f"eager {b['eager_gbps']:.0f} GB/s")
    m = data["machine"]
    print(f"machine: {m['cpu']} ({', '.join(m['isa'])}), {m['cores']} cores, {args.threads} threads")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in data["versions"].items()))
    print(report.table(results))
    print()
    print(report.summary_table(results))
    g = data["geomean"]
    print(f"geomean over ok rows: kiln vs eager {report.times(g['kiln_vs_eager'])}, "
          f"vs the best inductor configuration {report.times(g['kiln_vs_inductor'])}, "
          f"vs the best f32 peer {report.times(g['kiln_vs_best_peer'])} "
          f"(kiln_ts {report.times(g['kiln_ts_vs_best_peer'])}); kiln bf16 vs OpenVINO's default "
          f"{report.times(g['kiln_bf16_vs_openvino'])} (kiln_ts "
          f"{report.times(g['kiln_ts_bf16_vs_openvino'])}) ({data['seconds']:.0f} s)")
    path = report.write(pathlib.Path(args.out), data, args.name)
    print(f"wrote {path} and {path.with_suffix('.png')}")
    if args.report:
        from bench.report import publish
        for written in publish(path):
            print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
