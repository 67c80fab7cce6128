"""The results: the machine header, the table, latest.json (+ a timestamped copy), the chart."""

from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import platform


def machine(threads: int) -> dict:
    model, flags = platform.processor(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("", platform.processor()):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni",
                       "avx512_bf16", "amx_tile") if f in flags]
    info = {"cpu": model, "isa": isa, "cores": os.cpu_count(), "threads": threads,
            "os": platform.platform(), "python": platform.python_version()}
    import torch
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info


def _geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _fastest(rows: list[dict]) -> dict | None:
    ok = [r for r in rows if r and r["ok"] and r["median_ms"]]
    return min(ok, key=lambda r: r["median_ms"]) if ok else None


def ok_median(row: dict | None) -> float | None:
    """A row's median in ms where it matched eager, else None."""
    return row["median_ms"] if row and row["ok"] else None


def summaries(results: list[dict]) -> list[dict]:
    """Per model with a kiln row: kiln against eager, the best Inductor configuration and the
    best f32 peer (the faster of OpenVINO f32 and ONNX Runtime among those that match eager; a
    model where neither does has none). Ratios are the other's median over kiln's: above 1, kiln
    is faster. Beside them: kiln_ts (kiln's TorchScript entry, called as the peers' native APIs
    are, without dynamo) against the same peer, and `dynamo_ms`, what torch.compile's entry costs
    a call (kiln_ts_in_dynamo's median less kiln_ts's)."""
    from .backends import F32_PEERS, INDUCTOR_CONFIGS
    by = {(r["model"], r["backend"]): r for r in results}
    out = []
    for model in dict.fromkeys(r["model"] for r in results):
        kiln = by.get((model, "kiln"))
        if not kiln:
            continue
        inductor = _fastest([by.get((model, b)) for b in INDUCTOR_CONFIGS])
        peer = _fastest([by.get((model, b)) for b in F32_PEERS])
        ran_peers = [b for b in F32_PEERS if (model, b) in by]
        kiln_ms = ok_median(kiln)

        def ratio(other):
            return other["median_ms"] / kiln_ms if other and kiln_ms else None

        ts_ms = ok_median(by.get((model, "kiln_ts")))
        in_dynamo_ms = ok_median(by.get((model, "kiln_ts_in_dynamo")))
        out.append({
            "model": model, "kiln_ms": kiln_ms,
            "vs_eager": kiln["speedup_vs_eager"],
            "best_inductor": inductor["backend"] if inductor else None,
            "vs_best_inductor": ratio(inductor),
            "best_peer": peer["backend"] if peer else None,
            "vs_best_peer": ratio(peer),
            "peers_ran": bool(ran_peers),
            "ts_vs_best_peer": peer["median_ms"] / ts_ms if peer and ts_ms else None,
            "dynamo_ms": in_dynamo_ms - ts_ms if in_dynamo_ms and ts_ms else None,
        })
    return out


def bf16_vs_openvino(results: list[dict], ours: str = "kiln_bf16") -> list[float]:
    """Per model with convolutions or matrix products (zoo.Case.multiplies) where both ran
    within the reduced-precision tolerance: OpenVINO's default median over `ours`' (kiln_bf16 or
    kiln_ts_bf16; above 1, kiln is faster). A single elementwise or normalization op is the same
    code in either precision: counting it would say nothing about bf16."""
    from . import zoo  # here, not at the top: the case list imports torch

    no_products = {c.name for c in zoo.CASES if not c.multiplies}
    by = {(r["model"], r["backend"]): r for r in results}
    ratios = []
    for model in dict.fromkeys(r["model"] for r in results if r["model"] not in no_products):
        mine, theirs = by.get((model, ours)), by.get((model, "openvino"))
        if mine and theirs and mine["ok"] and theirs["ok"] and mine["median_ms"]:
            ratios.append(theirs["median_ms"] / mine["median_ms"])
    return ratios


def geomeans(results: list[dict]) -> dict:
    rows = summaries(results)
    return {"kiln_vs_eager": _geomean([s["vs_eager"] for s in rows]),
            "kiln_vs_inductor": _geomean([s["vs_best_inductor"] for s in rows]),
            "kiln_vs_best_peer": _geomean([s["vs_best_peer"] for s in rows]),
            "kiln_ts_vs_best_peer": _geomean([s["ts_vs_best_peer"] for s in rows]),
            "kiln_bf16_vs_openvino": _geomean(bf16_vs_openvino(results)),
            "kiln_ts_bf16_vs_openvino": _geomean(bf16_vs_openvino(results, "kiln_ts_bf16"))}


def summary_table(results: list[dict]) -> str:
    lines = [f"{'model':<24}{'kiln ms':>10}{'vs eager':>10}{'vs best inductor':>34}"
             f"{'vs best f32 peer':>26}{'kiln_ts vs it':>15}{'dynamo ms':>11}"]
    for s in summaries(results):
        inductor = (f"{s['vs_best_inductor']:.2f}x ({s['best_inductor']})"
                    if s["vs_best_inductor"] else "-")
        if s["vs_best_peer"]:
            peer = f"{s['vs_best_peer']:.2f}x ({s['best_peer']})"
        else:
            peer = "none matched eager" if s["peers_ran"] else "-"
        lines.append(f"{s['model']:<24}{_fmt(s['kiln_ms'], '.3f'):>10}"
                     f"{_fmt(s['vs_eager'], '.2f'):>9}x{inductor:>34}{peer:>26}"
                     f"{times(s['ts_vs_best_peer']):>15}{_fmt(s['dynamo_ms'], '.3f'):>11}")
    return "\n".join(lines)


def times(value) -> str:
    """A ratio as "1.23x", or "-" where there is none."""
    return "-" if value is None else f"{value:.2f}x"


def _fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def table(results: list[dict]) -> str:
    lines = [f"{'model':<24}{'backend':<22}{'median ms':>11}{'min-max ms':>21}{'speedup':>9}"
             f"{'compile s':>11}{'max abs diff':>14}  ok"]
    for r in results:
        span = (f"{r['min_ms']:.3f}-{r['max_ms']:.3f}" if r["min_ms"] is not None else "-")
        line = (f"{r['model']:<24}{r['backend']:<22}{_fmt(r['median_ms'], '.3f'):>11}{span:>21}"
                f"{_fmt(r['speedup_vs_eager'], '.2f') + ('x' if r['speedup_vs_eager'] else ''):>9}"
                f"{_fmt(r['compile_s'], '.1f'):>11}{_fmt(r['max_abs_diff'], '.1e'):>14}  "
                f"{'yes' if r['ok'] else 'NO'}")
        if r["error"]:
            line += f"  ({r['error']})"
        lines.append(line)
    return "\n".join(lines)


def write(out_dir: pathlib.Path, report: dict, name: str = "latest") -> pathlib.Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    text = json.dumps(report, indent=2)
    (out_dir / f"{name}.json").write_text(text)
    (out_dir / f"{report['suite']}-{stamp}.json").write_text(text)
    try:
        chart(report["results"], out_dir / f"{name}.png", report)
    except ImportError as error:  # a machine without matplotlib still gets the JSON
        print(f"no chart: {error}")
    return out_dir / f"{name}.json"


def chart(results: list[dict], path: pathlib.Path, report: dict) -> None:
    """Speedup over eager per model and backend, log scale, eager = 1; rows not ok are left out."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    models = list(dict.fromkeys(r["model"] for r in results))
    # kiln_ts_in_dynamo measures torch.compile's entry; it is no way to run a model.
    names = [b for b in dict.fromkeys(r["backend"] for r in results)
             if b not in ("eager", "kiln_ts_in_dynamo")]
    by = {(r["model"], r["backend"]): r for r in results}
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(models)), 4.8))
    for i, name in enumerate(names):
        xs, ys = [], []
        for j, model in enumerate(models):
            r = by.get((model, name))
            if r and r["ok"] and r["speedup_vs_eager"]:
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                ys.append(r["speedup_vs_eager"])
        # Bars grow from eager's 1.0: up for faster, down for slower.
        ax.bar(xs, [y - 1 for y in ys], width, label=name, bottom=1)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("speedup over eager (log)")
    m = report["machine"]
    ax.set_title(f"kiln bench ({report['suite']}): {m['cpu']}, {m['threads']} threads", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
