"""`make bench-compile`: how long a model's first call takes when it compiles, in a fresh process
each time: cold (empty caches) and warm (a second process over the caches the first one filled).

    python bench/compile_time.py [--cases resnet50_b1,bert4_s128] [--backends kiln,kiln_ts,...]

Backends, each with its own persistent cache the way its users turn it on: kiln (torch.compile)
and kiln_ts (kiln.compile of a traced module) with KILN_CACHE_DIR, Inductor with
TORCHINDUCTOR_CACHE_DIR (its FX graph and AOTAutograd caches, on by default), OpenVINO with its
CACHE_DIR. kiln's rows also give kiln's own compile time (kiln.stats()["compile_seconds"]), the
rest of the first call being dynamo, AOTAutograd, kiln's Python partitioning (torch.compile) or
tracing (kiln_ts), and the run itself. Writes bench/results/compile.json and
docs/compile-times.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BACKENDS = ["kiln", "kiln_ts", "kiln_ts_file", "kiln_package", "inductor", "openvino"]


def _bert4():
    import torch
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    sys.path.insert(0, str(ROOT / "bench"))
    from suite.zoo import FirstOutput, _standalone

    config = _standalone(BertConfig())  # BERT-base layers: hidden 768, 12 heads
    layers = torch.nn.Sequential(*[FirstOutput(BertLayer(config)) for _ in range(4)])
    return layers, (torch.randn(1, 128, config.hidden_size),)


def _resnet50():
    import torch
    import torchvision

    return torchvision.models.resnet50(), (torch.randn(1, 3, 224, 224),)


CASES = {"resnet50_b1": _resnet50, "bert4_s128": _bert4}


_to_save = []  # a kiln_package cold run's compiled model
_parts = {}  # parts of a first call measured on the way (kiln_ts: the trace; kiln_ts_file: the read)


def _first_call(backend: str, model, inputs, cache: str):
    """Compiles `model` with `backend` and calls it once; returns the seconds that took."""
    import torch

    start = time.perf_counter()
    if backend == "kiln":
        torch.compile(model, backend="kiln", dynamic=False)(*inputs)
    elif backend == "kiln_ts":
        import kiln

        traced = torch.jit.trace(model, inputs)
        _parts["torch_s"] = time.perf_counter() - start
        kiln.compile(traced)(*inputs)
    elif backend == "kiln_ts_file":  # a TorchScript file, as a C++ deployment has one
        import kiln

        module = torch.jit.load(os.path.join(cache, "model.pt"))
        _parts["torch_s"] = time.perf_counter() - start  # torch's share, as the trace is
        kiln.compile(module)(*inputs)
    elif backend == "kiln_package":
        import kiln

        package = os.path.join(cache, "model.kiln")
        if os.path.exists(package):  # warm: load the package the cold run saved
            kiln.load(package)(*inputs)
        else:  # cold: the TorchScript path's first call (the child then saves it, untimed)
            _to_save.append(kiln.compile(torch.jit.trace(model, inputs)))
            _to_save[-1](*inputs)
    elif backend == "inductor":
        torch.compile(model, dynamic=False)(*inputs)
    elif backend == "openvino":
        import openvino as ov

        converted = ov.convert_model(model, example_input=inputs)
        config = {"INFERENCE_NUM_THREADS": torch.get_num_threads(), "CACHE_DIR": cache}
        request = ov.Core().compile_model(converted, "CPU", config).create_infer_request()
        request.infer([t.numpy() for t in inputs])
    else:
        raise ValueError(f"unknown backend {backend}")
    return time.perf_counter() - start


def first_call_parts(stats: dict) -> dict:
    """Where a torch.compile first call went: dynamo's tracing and guards, AOTAutograd (less
    kiln's compilers, which it calls), kiln's Python compilers (partitioning, FX graph
    preparation), kiln's C++ compile (at the first run: import, passes, code, plan)."""
    from torch._dynamo.utils import compilation_time_metrics as metrics

    def total(name):
        return sum(metrics.get(name, ()))

    # AOTAutograd calls kiln's compilers, which also write its graphs to kiln's disk cache (kiln's
    # key and lookup run before it: ~20 ms that this takes off AOTAutograd's share too); a graph
    # loaded from that cache skips AOTAutograd.
    aot = total("create_aot_dispatcher_function")
    kiln_python = stats["python_compile_seconds"] + stats["aot_cache_seconds"]
    return {"dynamo_trace_s": total("bytecode_tracing"), "guards_s": total("build_guards"),
            "aot_autograd_s": max(aot - kiln_python, 0.0) if aot else 0.0,
            "kiln_python_s": kiln_python}


def child(case: str, backend: str, cache: str) -> None:
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    model, inputs = CASES[case]()
    model.eval()
    import kiln  # imported before timing for every backend alike

    package = os.path.join(cache, "model.kiln")
    warm_package = backend == "kiln_package" and os.path.exists(package)
    if backend == "kiln_ts_file" and not os.path.exists(os.path.join(cache, "model.pt")):
        os.makedirs(cache, exist_ok=True)
        with torch.no_grad():  # untimed: the file is what this row starts from
            torch.jit.trace(model, inputs).save(os.path.join(cache, "model.pt"))
    with torch.no_grad():
        seconds = _first_call(backend, model, inputs, cache)
    result = {"first_call_s": seconds, **_parts}
    if backend.startswith("kiln"):
        stats = kiln.stats()
        result.update(kiln_compile_s=stats["compile_seconds"], hits=stats["disk_cache_hits"],
                      misses=stats["disk_cache_misses"])
    if backend == "kiln":
        result.update(first_call_parts(kiln.stats()))
    if _to_save:
        os.makedirs(cache, exist_ok=True)
        kiln.save(_to_save[0], package)
    if warm_package:  # what the first call is held to: reading the file, and three calls
        start = time.perf_counter()
        with open(package, "rb") as f:
            f.read()
        result["read_s"] = time.perf_counter() - start
        loaded = kiln.load(package)
        with torch.no_grad():
            loaded(*inputs)
            start = time.perf_counter()
            for _ in range(3):
                loaded(*inputs)
        result["three_calls_s"] = time.perf_counter() - start
    print(json.dumps(result))


def measure(case: str, backend: str, cache_root: str) -> dict:
    cache = os.path.join(cache_root, f"{case}-{backend}")
    env = {**os.environ, "KILN_LOG": "error", "KILN_CACHE_DIR": cache,
           "TORCHINDUCTOR_CACHE_DIR": cache}
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    env.pop("KILN_CACHE", None)
    runs = {}
    for run in ("cold", "warm"):
        # A loaded package must not lean on the disk cache the cold run filled.
        run_env = {**env, "KILN_CACHE": "0"} if backend == "kiln_package" and run == "warm" else env
        out = subprocess.run([sys.executable, __file__, "--child", case, backend, cache],
                             capture_output=True, text=True, env=run_env, timeout=900)
        if out.returncode != 0:
            runs[run] = {"error": out.stderr.strip().splitlines()[-1:]}
        else:
            runs[run] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{case:12s} {backend:9s} {run}: {runs[run]}", flush=True)
    return runs


def page(data: dict) -> str:
    lines = ["# Compile times", "",
             "Generated by `make bench-compile` (bench/compile_time.py); every run overwrites it.",
             "Each figure is one fresh process: the first call of the compiled model (compile and",
             "one run), cold (empty caches) and warm (a second process over the caches the first",
             "filled). For kiln, `kiln compile` is kiln's own share (passes, code generation,",
             "loading); the rest of the first call is dynamo, AOTAutograd and kiln's partitioning",
             "(torch.compile) or tracing (kiln_ts), and the run. kiln_package: cold is the",
             "TorchScript path's first call (then `kiln.save`, untimed); warm is `kiln.load` of",
             "that package and its first call, in a process with the disk cache off",
             "(`KILN_CACHE=0`). Below the table: the file's read time and three",
             "steady calls, which a loaded package's first call is held to.", "",
             f"- date: {data['date']}", f"- machine: {data['machine']}", "",
             "| model | backend | cold first call | warm first call | kiln compile, cold | "
             "kiln compile, warm |", "|---|---|---|---|---|---|"]
    for case, backends in data["results"].items():
        for backend, runs in backends.items():
            def cell(run, key="first_call_s"):
                value = runs.get(run, {}).get(key)
                return "fails" if "error" in runs.get(run, {}) else (
                    "-" if value is None else f"{value:.2f} s")
            lines.append(f"| {case} | {backend} | {cell('cold')} | {cell('warm')} | "
                         f"{cell('cold', 'kiln_compile_s')} | {cell('warm', 'kiln_compile_s')} |")
    lines.append("")
    lines += ["Where a torch.compile first call with kiln goes (dynamo's own timers; AOTAutograd",
              "without kiln's compilers, which it calls, and not called for a graph kiln's disk",
              "cache holds; kiln's Python compilers and that cache's lookups; kiln's C++",
              "compile; the rest: the run, dynamo's bookkeeping). kiln_ts: the trace",
              "(`torch.jit.trace`, which checks its trace by tracing again) is most of it;",
              "kiln_ts_file starts from a saved TorchScript file instead, and",
              "`torch.jit.load`, like the trace, is torch's share (below).", "",
              "| model | run | first call | dynamo tracing | guards | AOTAutograd | kiln Python |"
              " kiln C++ | rest |", "|---|---|---|---|---|---|---|---|---|"]
    traces = []
    for case, backends in data["results"].items():
        for run, r in backends.get("kiln", {}).items():
            if "dynamo_trace_s" not in r:
                continue
            parts = [r["dynamo_trace_s"], r["guards_s"], r["aot_autograd_s"], r["kiln_python_s"],
                     r["kiln_compile_s"]]
            cells = " | ".join(f"{p:.2f} s" for p in parts + [r["first_call_s"] - sum(parts)])
            lines.append(f"| {case} | {run} | {r['first_call_s']:.2f} s | {cells} |")
        for backend, what in (("kiln_ts", "the trace"), ("kiln_ts_file", "`torch.jit.load`")):
            for run, r in backends.get(backend, {}).items():
                if "torch_s" in r:
                    traces.append(f"- {case}, {backend} {run}: {what} {r['torch_s']:.2f} s of "
                                  f"{r['first_call_s']:.2f} s; kiln.compile and the first call "
                                  f"{r['first_call_s'] - r['torch_s']:.2f} s")
    lines += [""] + traces + [""]
    for case, backends in data["results"].items():
        warm = backends.get("kiln_package", {}).get("warm", {})
        if "read_s" in warm:
            lines.append(f"- {case}, kiln_package: load and first call {warm['first_call_s']:.2f} s;"
                         f" reading the file {warm['read_s']:.2f} s, three steady calls "
                         f"{warm['three_calls_s']:.2f} s")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as cache_root:
        for case in args.cases.split(","):
            results[case] = {b: measure(case, b, cache_root) for b in args.backends.split(",")}
    import platform

    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "results": results}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "compile.json").write_text(json.dumps(data, indent=1))
    (ROOT / "docs" / "compile-times.md").write_text(page(data))
    print("wrote bench/results/compile.json and docs/compile-times.md")


if __name__ == "__main__":
    main()
