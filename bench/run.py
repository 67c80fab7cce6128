"""`make bench` at the foundation stage: kiln against LibTorch's TorchScript interpreter on the
test models, via `kiln run` (interleaved iterations, medians from the same run).

Prints a table and writes bench/results/latest.json. The bench-suite issue grows this into the
model zoo with eager, Inductor and the other peers.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOLERANCE = 1e-4


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="build")
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    build = ROOT / args.build
    with open(build / "models" / "models.json") as f:
        models = json.load(f)

    rows = []
    for i, (name, info) in enumerate(models.items(), 1):
        print(f"[{i}/{len(models)}] {name}", file=sys.stderr, flush=True)
        cmd = [str(build / "kiln"), "run", str(build / "models" / f"{name}.pt"), "--iters", str(args.iters)]
        for spec in info["inputs"]:
            cmd += ["--input", spec]
        result = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "KILN_LOG": "error"})
        if result.returncode != 0:
            rows.append({"model": name, "error": result.stderr.strip().splitlines()[-1]})
            continue
        report = json.loads(result.stdout.strip().splitlines()[-1])
        report["model"] = name
        report["ratio"] = report["reference_ms"] / report["kiln_ms"]
        report["ok"] = report["max_abs_diff"] <= TOLERANCE
        rows.append(report)

    print(f"\n{'model':<16}{'kiln ms':>10}{'LibTorch ms':>13}{'speedup':>9}{'max abs diff':>14}  ok")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<16}  failed: {r['error']}")
            continue
        print(f"{r['model']:<16}{r['kiln_ms']:>10.3f}{r['reference_ms']:>13.3f}{r['ratio']:>8.2f}x"
              f"{r['max_abs_diff']:>14.2e}  {'yes' if r['ok'] else 'NO'}")
    threads = next((r["threads"] for r in rows if "threads" in r), None)
    print(f"\nspeedup = LibTorch median / kiln median, same run, {args.iters} interleaved iterations; "
          f"{threads} threads; tolerance {TOLERANCE}")

    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    payload = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
               "threads": threads, "results": rows}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for name in ("latest.json", f"{stamp}.json"):
        with open(out / name, "w") as f:
            json.dump(payload, f, indent=2)
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
