"""`make bench-dynamic`: models whose input sizes change from call to call, as in serving and
decoding, under eager, kiln (torch.compile with dynamo's defaults; kiln_bf16: the same with
precision="bf16") and Inductor (dynamic=True), each in a fresh process with empty caches.

    python bench/dynamic_shapes.py [--cases bert2_lengths,resnet18_batches,gpt2_generate]

Streams: a 2-layer BERT encoder over 50 sequence lengths from 1 to 512, ResNet-18 over 10 batch
sizes from 1 to 32 and over 10 square image sides from 160 to 448 (eight multiples of 32, two
not; each stream in a fixed shuffled order), and greedy generation of 64 tokens with
transformers' KV cache on a 2-layer GPT-2; all but generation also through kiln's TorchScript
path (kiln_ts: the model traced, then kiln.compile). The first pass over a stream includes every
compile; the median of three more (for generation, the faster of two later generations) is the
steady state. Per backend:
both passes' times, kiln's and dynamo's compile counts, kiln's fallbacks to eager, and the
largest difference from eager over the stream (generation: whether the tokens are eager's).
Writes bench/results/dynamic.json and docs/dynamic-shapes.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BACKENDS = ["eager", "kiln", "kiln_bf16", "inductor", "kiln_ts"]
# kiln's TorchScript path (kiln.compile of a traced module): not for generation, which is a loop
# tracing cannot capture.
TRACEABLE = {"bert2_lengths", "resnet18_batches", "resnet18_sides"}
NEW_TOKENS = 64
# Passes over a stream after the first (which compiles): their median is the steady state, so
# that one pass slowed by the shared machine does not make a row.
STEADY_PASSES = 3


def _bert2():
    import torch
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=1024, vocab_size=1000, max_position_embeddings=512)
    model = BertModel(config, add_pooling_layer=False)
    lengths = random.Random(0).sample(range(1, 513), 50)
    return model, [(torch.randint(0, 1000, (1, n)),) for n in lengths]


def _resnet18():
    import torch
    import torchvision

    batches = [1, 2, 3, 5, 8, 12, 16, 21, 27, 32]
    random.Random(0).shuffle(batches)
    return torchvision.models.resnet18(), [(torch.randn(b, 3, 224, 224),) for b in batches]


def _resnet18_sides():
    import torch
    import torchvision

    # Square images of sides 160 to 448: eight multiples of 32 (a ResNet's stride product, one
    # class in steps of it) and two sides off it (each compiled on its own).
    sides = [160, 192, 224, 256, 288, 320, 384, 448, 240, 200]
    random.Random(0).shuffle(sides)
    return torchvision.models.resnet18(), [(torch.randn(1, 3, s, s),) for s in sides]


def _gpt2():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1000, n_positions=256)
    return GPT2LMHeadModel(config), [(torch.randint(0, 1000, (2, 8)),)]


CASES = {"bert2_lengths": _bert2, "resnet18_batches": _resnet18,
         "resnet18_sides": _resnet18_sides, "gpt2_generate": _gpt2}


def _first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):  # a traced model's ModelOutput
        return out["last_hidden_state"]
    return out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state


def _example(case: str, stream: list):
    """What kiln_ts traces with: the stream's input whose varying size is nearest 16 (at a size of
    1 tracing would record that size's own branches)."""
    dim = 0 if case == "resnet18_batches" else -1
    return min(stream, key=lambda inputs: abs(inputs[0].shape[dim] - 16))


def _compiled(backend: str, model, example=None):
    import torch

    if backend == "eager":
        return model
    if backend == "kiln_ts":
        import kiln

        return kiln.compile(torch.jit.trace(model, example, strict=False))
    if backend == "kiln":
        return torch.compile(model, backend="kiln")  # dynamo's defaults, as users call it
    if backend == "kiln_bf16":  # float32 where the CPU has no native bf16 (it warns)
        return torch.compile(model, backend="kiln", options={"precision": "bf16"})
    return torch.compile(model, dynamic=True)


def _counts() -> dict:
    import torch

    import kiln

    stats = kiln.stats()
    return {"kiln_specializations": stats["specializations"], "kiln_fallbacks": stats["fallbacks"],
            "kiln_shape_classes": stats["shape_classes"], "kiln_class_plans": stats["class_plans"],
            "kiln_compile_s": stats["compile_seconds"],
            "dynamo_graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"]}


def child(case: str, backend: str) -> None:
    """Runs one case under one backend; prints its figures as one JSON line."""
    import torch

    torch.manual_seed(0)
    model, stream = CASES[case]()
    model.eval()
    result = {"case": case, "backend": backend, "calls": len(stream)}
    with torch.no_grad():
        if case == "gpt2_generate":
            (ids,) = stream[0]
            reference = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
            model.forward = _compiled(backend, model.forward)
            runs = []
            for _ in range(3):
                start = time.perf_counter()
                tokens = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
                runs.append(time.perf_counter() - start)
            result.update(first_pass_s=runs[0], steady_s=min(runs[1:]),
                          per_token_ms=min(runs[1:]) / NEW_TOKENS * 1e3,
                          same_tokens=bool(torch.equal(tokens, reference)), max_abs_diff=0.0)
        else:
            references = [_first_tensor(model(*inputs)) for inputs in stream]
            run = _compiled(backend, model, _example(case, stream))
            passes, diff = [], 0.0
            for _ in range(1 + STEADY_PASSES):
                start = time.perf_counter()
                outputs = [_first_tensor(run(*inputs)) for inputs in stream]
                passes.append(time.perf_counter() - start)
            for out, ref in zip(outputs, references):
                diff = max(diff, (out - ref).abs().max().item())
            result.update(first_pass_s=passes[0], steady_s=statistics.median(passes[1:]),
                          max_abs_diff=diff)
    result.update(_counts())
    if backend == "kiln_ts":  # no dynamo: the module's own compiles instead
        result["dynamo_graphs"] = run.num_specializations
    print("RESULT " + json.dumps(result), flush=True)


def measure(case: str, backend: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(cache, "kiln"), KILN_LOG="error",
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
        proc = subprocess.run([sys.executable, __file__, "--child", case, backend], env=env,
                              capture_output=True, text=True, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"case": case, "backend": backend, "error": tail[0][:300]}


def _ratio(rows: dict, other: str, key: str, ours: str = "kiln") -> str:
    ours, theirs = rows.get(ours, {}).get(key), rows.get(other, {}).get(key)
    return f"{theirs / ours:.2f}x" if ours and theirs else "-"


def page(data: dict) -> str:
    lines = ["# Dynamic shapes: compile counts and stream times",
             "",
             "Generated by `make bench-dynamic` (bench/dynamic_shapes.py); every run overwrites it. "
             "Each case under each backend in a fresh process with empty caches; kiln with dynamo's "
             "defaults (kiln_bf16: with `precision=\"bf16\"`, its max abs diff that of bf16 "
             "products), Inductor with `dynamic=True`, kiln_ts: kiln's TorchScript path "
             "(`kiln.compile` of the model traced at a size of the stream; its graphs column "
             "counts the module's compiles).",
             "",
             f"- date: {data['date']}; machine: {data['machine']}; threads: {data['threads']}",
             "",
             "| case | backend | first pass | steady pass | kiln specializations (shape classes) "
             "| kiln class plans | kiln fallbacks | kiln compile s | graphs | max abs diff "
             "| same tokens |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_case: dict = {}
    for r in data["results"]:
        by_case.setdefault(r["case"], {})[r["backend"]] = r
        if "error" in r:
            lines.append(f"| {r['case']} | {r['backend']} | fails: `{r['error']}` ||||||||||")
            continue
        tokens = {True: "yes", False: "**no**"}.get(r.get("same_tokens"), "-")
        lines.append(f"| {r['case']} | {r['backend']} | {r['first_pass_s']:.2f} s | "
                     f"{r['steady_s']:.3f} s | {r['kiln_specializations']} "
                     f"({r.get('kiln_shape_classes', 0)}) | {r.get('kiln_class_plans', 0)} | "
                     f"{r['kiln_fallbacks']} | "
                     f"{r['kiln_compile_s']:.2f} | {r['dynamo_graphs']} | {r['max_abs_diff']:.1e} | "
                     f"{tokens} |")
    lines += ["", "Steady pass, kiln against the others (their time over kiln's; above 1, kiln is "
              "faster):", "", "| case | vs eager | vs Inductor | kiln_ts vs eager "
              "| kiln_bf16 vs eager |", "|---|---|---|---|---|"]
    for case, rows in by_case.items():
        lines.append(f"| {case} | {_ratio(rows, 'eager', 'steady_s')} | "
                     f"{_ratio(rows, 'inductor', 'steady_s')} | "
                     f"{_ratio(rows, 'eager', 'steady_s', ours='kiln_ts')} | "
                     f"{_ratio(rows, 'eager', 'steady_s', ours='kiln_bf16')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--child", nargs=2, metavar=("CASE", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from suite import report

    results = []
    for case in args.cases.split(","):
        for backend in args.backends.split(","):
            if backend == "kiln_ts" and case not in TRACEABLE:
                continue
            row = measure(case, backend)
            print(json.dumps(row), flush=True)
            results.append(row)
    import torch

    machine = report.machine(torch.get_num_threads())
    data = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{machine['cpu']} ({', '.join(machine['isa'])}), {machine['cores']} cores",
            "threads": torch.get_num_threads(), "results": results}
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dynamic.json").write_text(json.dumps(data, indent=2))
    (ROOT / "docs" / "dynamic-shapes.md").write_text(page(data))
    print("wrote bench/results/dynamic.json and docs/dynamic-shapes.md")


if __name__ == "__main__":
    main()
