"""The model fuzzer's command line: `make fuzz-models SEEDS=a:b` runs it.

    python tests/fuzz_models/run.py --seeds 0:200 [--out DIR] [--lenient] [--file CASE.py]
        [--modes infer,train,trace,script,stream,script_stream,bf16,trace_bf16,sides,script_sides,
                 train_stream]

kiln compiles with strict=True unless --lenient: a fallback (to eager, the interpreter or ATen)
would otherwise hide the failure that caused it behind eager's correct result. Prints one line
per seed, writes a self-contained reproducer per failure under --out, and exits
1 when any seed failed. Seeds are independent: campaigns split a range between runs or sessions.

The seeds run in a worker process. When it dies (a crash in native code), the seed it was on is
run again eagerly alone in a fresh process: if eager crashes too, the case hit a PyTorch bug and
counts as `eager-crash`, not against kiln; otherwise it is a kiln crash, a failure with a
reproducer. The worker then goes on from the next seed.
"""

import argparse
import collections
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

MODES = ("infer", "train", "trace", "script", "stream", "script_stream", "bf16", "trace_bf16",
         "sides", "script_sides", "train_stream")
LINE = re.compile(r"^seed (\d+) ")


def seed_range(text: str) -> range:
    first, _, last = text.partition(":")
    return range(int(first), int(last) if last else int(first) + 1)


def worker(seeds: range, modes: list, out: pathlib.Path, strict: bool, eager_only: bool) -> int:
    import torch  # noqa: F401  (imported here: the driver never loads torch or kiln)

    from differential import check, eager_runs, reproducer
    from generator import generate

    failed = False
    for seed in seeds:
        case = generate(seed)
        invalid = eager_runs(case.source, case.trainable)
        if invalid or eager_only:
            status = f"eager fails ({invalid})" if invalid else "eager ok"
            print(f"seed {seed} {case.family}: {status}", flush=True)
            failed = failed or bool(invalid)
            continue
        wanted = [m for m in modes if not m.startswith("train") or case.trainable]
        outcomes = check(case.source, wanted, strict=strict)
        detailed = ("stream", "sides", "bf16")  # the classes made, the errors measured
        shown = [f"{o.mode}:{o.status}"
                 + (f" ({o.detail})" if o.mode.endswith(detailed) and o.status == "pass" else "")
                 for o in outcomes]
        print(f"seed {seed} {case.family}: " + " ".join(shown))
        for o in (o for o in outcomes if o.status == "fail"):
            failed = True
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"seed{seed}_{o.mode}.py"
            path.write_text(reproducer(case.source, o.mode, o.detail))
            print(f"  {o.detail.strip().splitlines()[-1]}\n  reproducer: {path}")
        sys.stdout.flush()
    return 1 if failed else 0


def check_file(path: pathlib.Path, modes: list, strict: bool) -> int:
    from differential import check

    outcomes = check(path.read_text(), modes, strict=strict)
    for o in outcomes:
        print(f"{o.mode}: {o.status} {o.detail}")
    return 1 if any(o.status == "fail" for o in outcomes) else 0


def spawn(seeds: range, argv: list) -> subprocess.Popen:
    command = [sys.executable, __file__, "--worker", "--seeds", f"{seeds.start}:{seeds.stop}", *argv]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def crashes_eagerly(seed: int, argv: list) -> bool:
    process = spawn(range(seed, seed + 1), argv + ["--eager-only"])
    process.communicate()
    return process.returncode < 0


def drive(seeds: range, argv: list, out: pathlib.Path) -> int:
    counts = collections.Counter()
    start, next_seed = time.monotonic(), seeds.start
    while next_seed < seeds.stop:
        process = spawn(range(next_seed, seeds.stop), argv)
        for line in process.stdout:
            print(line, end="", flush=True)
            match = LINE.match(line)
            if not match:
                continue
            next_seed = int(match.group(1)) + 1
            if "eager fails" in line:
                counts["invalid"] += 1
            for mode, status in re.findall(r"(\w+):(pass|fail|skip)", line):
                counts[f"{mode} {status}"] += 1
            for classes, plans in re.findall(r"(\d+) classes, (\d+) plans", line):
                counts["stream classes"] += int(classes)
                counts["stream plans"] += int(plans)
        process.wait()
        if process.returncode >= 0:
            break
        crashed = next_seed
        next_seed += 1
        if crashes_eagerly(crashed, argv):
            counts["eager-crash"] += 1
            print(f"seed {crashed}: eager PyTorch crashes on this case too; not counted against kiln")
        else:
            counts["kiln-crash"] += 1
            out.mkdir(parents=True, exist_ok=True)
            from generator import generate

            path = out / f"seed{crashed}_crash.py"
            path.write_text("# kiln model fuzzer: the process crashed under kiln\n" + generate(crashed).source)
            print(f"seed {crashed}: CRASH under kiln (signal {-process.returncode}); reproducer: {path}")
    print(f"{dict(sorted(counts.items()))} in {time.monotonic() - start:.0f} s")
    bad = ("fail", "invalid", "kiln-crash")
    return 1 if any(key.endswith(bad) or key in bad for key in counts) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:20", help="a:b, b excluded")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", default="build/fuzz_models", help="where reproducers go")
    parser.add_argument("--lenient", action="store_true",
                        help="compile without strict=True: fallbacks then pass silently")
    parser.add_argument("--file", help="check one saved case (a reproducer) in this process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--eager-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; allowed: {', '.join(MODES)}")
    out = pathlib.Path(args.out)
    if args.file:
        return check_file(pathlib.Path(args.file), modes, not args.lenient)
    if args.worker:
        return worker(seed_range(args.seeds), modes, out, not args.lenient, args.eager_only)
    passed_on = ["--modes", args.modes, "--out", args.out] + (["--lenient"] if args.lenient else [])
    return drive(seed_range(args.seeds), passed_on, out)


if __name__ == "__main__":
    sys.exit(main())
