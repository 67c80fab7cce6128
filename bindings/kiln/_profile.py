"""kiln.profile: where a compiled model's time goes, plan step by plan step, and the same model's
per-layer times from OpenVINO (PERF_COUNT) and ONNX Runtime (its profiler) beside it, where they
are installed. `kiln profile --peers` (the C++ tool) prints the peers' side through
kiln.profile_peers, which uses this module.

The layers of the three are matched two ways: by class of work (convolution, gemm, elementwise,
...), always; and layer by layer along a skeleton, the convolutions or the GEMMs (whichever kiln
runs more of): each such layer with the lighter ops after it, up to the next one, is a segment,
and segments are paired in execution order where their layers' input and output sizes agree.
"""

from __future__ import annotations

import functools
import json
import math
import tempfile
import time

import torch

from . import _C, _peers

_ELEMENTWISE = {
    "abs", "add", "and", "biasgelu", "ceil", "clamp", "clip", "cos", "div", "divide", "elu",
    "eltwise", "equal", "erf", "exp", "fastgelu", "floor", "gelu", "greater", "hardsigmoid",
    "hardswish", "hswish", "leakyrelu", "less", "log", "max", "maximum", "min", "minimum",
    "mish", "mul", "multiply", "neg", "not", "or", "power", "pow", "prelu", "quickgelu", "relu",
    "round", "select", "sigmoid", "sin", "softplus", "sqrt", "sub", "subgraph", "subtract",
    "swish", "tanh", "where",
}  # fmt: skip
_RULES = [  # (class, substrings of a peer's op type that name it), tried in order
    ("attention", ("attention",)),
    ("gemm", ("matmul", "gemm", "fullyconnected", "innerproduct")),
    ("layout", ("reorder", "transpose")),
    ("normalization", ("softmax", "norm", "mvn")),
    ("pooling", ("pool",)),
    ("reduction", ("reduce",)),
    ("view", ("reshape", "squeeze", "flatten", "identity", "shape", "view")),
    ("copy", ("concat", "split", "slice", "gather", "expand", "cast", "convert", "pad", "tile")),
]


def category(op_type: str) -> str:
    """The class of work of a peer's op type (OpenVINO's node types, ONNX op names), in kiln's
    classes."""
    op = op_type.lower()
    if "convolution" in op or op in ("conv", "fusedconv", "convtranspose", "nchwcconv"):
        return "convolution"
    for name, parts in _RULES:
        if any(part in op for part in parts):
            return name
    return "elementwise" if op in _ELEMENTWISE else "other"


class Profile:
    """What kiln.profile found: `kiln` (kiln's profile: per-call times of every plan step),
    `peers` (per peer: its per-layer times, or why it did not run) and `text`, the report."""

    def __init__(self, kiln: dict, peers: dict, text: str):
        self.kiln = kiln
        self.peers = peers
        self.text = text

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> str:
        return json.dumps({"kiln": self.kiln, "peers": self.peers})


PEER_PRECISIONS = ("f32", "default")  # kiln.profile's peer_precision, profile_peers's


def profile(fn, *inputs, calls: int = 20, warmup: int = 3, peers: bool = True, rows: int = 25,
            peer_precision: str = "f32"):
    """Profiles `calls` calls of `fn(*inputs)`, after `warmup` untimed ones (the first compiles).

    `fn`: a model compiled with kiln (torch.compile(backend="kiln"), kiln.compile) or any callable
    that runs kiln inside; an nn.Module not yet compiled is compiled with
    torch.compile(backend="kiln") first. With `peers`, the original module (the one compiled) runs
    under OpenVINO (PERF_COUNT) and ONNX Runtime (its profiler) on the same inputs; a peer that
    is not installed or fails is reported so. `peer_precision`: "f32" (OpenVINO's f32 precision
    hint, for a kiln fp32 compile) or "default" (OpenVINO's default precision, bf16 where the CPU
    has it: the peer for precision="bf16"). Returns a Profile; print it.
    """
    if peer_precision not in PEER_PRECISIONS:
        raise ValueError(f"kiln.profile: peer_precision must be one of {PEER_PRECISIONS}, got "
                         f"{peer_precision!r}")
    if not isinstance(calls, int) or not 1 <= calls <= 1_000_000:
        raise ValueError(f"kiln.profile: calls must be an integer from 1 to 1000000, got {calls!r}")
    if not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"kiln.profile: warmup must be an integer >= 1, got {warmup!r}")
    original = getattr(fn, "_orig_mod", fn)
    if isinstance(fn, torch.nn.Module) and not hasattr(fn, "_orig_mod"):
        fn = torch.compile(fn, backend="kiln")
    with torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
        call_ms = 0.0  # a call that raises leaves it so: the session is closed all the same
        _C.start_profiling()
        try:
            start = time.perf_counter()
            for _ in range(calls):
                fn(*inputs)
            call_ms = (time.perf_counter() - start) * 1e3 / calls
        finally:
            report = _C.finish_profiling(calls, call_ms, rows)
    kiln = json.loads(report[0])
    peer_results = {}
    if peers:
        if isinstance(original, torch.nn.Module):  # ScriptModules too
            peer_results = profile_peers(original, inputs, calls, warmup, peer_precision)
        else:
            peer_results = {"peers": "not run: fn is not a module (pass the nn.Module itself)"}
    text = "kiln: " + report[1] + compare(kiln, peer_results, rows)
    return Profile(kiln, peer_results, text)


def profile_peers(model, inputs: tuple, calls: int, warmup: int, precision: str = "f32") -> dict:
    """{peer: its layers, or the reason it did not run}. `precision`: OpenVINO's, "f32" or
    "default" (kiln.profile's peer_precision)."""
    results = {}
    openvino = functools.partial(_profile_openvino, f32=precision == "f32")
    for name, run in ((f"OpenVINO {precision}", openvino), ("ONNX Runtime", _profile_onnxruntime)):
        try:
            results[name] = run(model, tuple(inputs), calls, warmup)
        except ImportError as e:
            results[name] = f"not installed ({e.name})"
        except Exception as e:  # noqa: BLE001  a peer that fails on a model is reported, not fatal
            results[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return results


def _first_shape(typed_shapes) -> list:
    """ONNX Runtime's `[{"float": [1, 64, 56, 56]}, ...]`: the first one's sizes."""
    return list(next(iter(typed_shapes[0].values()))) if typed_shapes else []


def _layers(totals: dict, calls: int) -> list:
    return [
        {
            "name": name,
            "op": op,
            "category": category(op),
            "ms": seconds * 1e3 / calls,
            "input": list(input_sizes),
            "output": list(output_sizes),
        }
        for name, (op, seconds, input_sizes, output_sizes) in totals.items()  # in first-run order
    ]


def _profile_openvino(model, inputs: tuple, calls: int, warmup: int, f32: bool = True) -> dict:
    from openvino import ProfilingInfo

    request = _peers.openvino_request(model, inputs, f32=f32, perf_count=True)
    sizes = {}  # layer name -> (first input's sizes, first output's sizes)
    for op in request.get_compiled_model().get_runtime_model().get_ordered_ops():
        shapes = [i.get_partial_shape() for i in op.inputs()[:1]]
        shapes.append(op.output(0).get_partial_shape())
        if all(s.is_static for s in shapes) and len(shapes) == 2:
            sizes[op.get_friendly_name()] = tuple([d.get_length() for d in s] for s in shapes)
    arrays = [a.numpy() for a in inputs]
    for _ in range(warmup):
        request.infer(arrays, share_inputs=True)
    totals, wall = {}, 0.0
    for _ in range(calls):
        start = time.perf_counter()
        request.infer(arrays, share_inputs=True)
        wall += time.perf_counter() - start
        for info in request.profiling_info:  # this call's counters
            if info.status != ProfilingInfo.Status.EXECUTED:
                continue
            shape = sizes.get(info.node_name, ([], []))
            entry = totals.setdefault(info.node_name, [info.node_type, 0.0, *shape])
            entry[1] += info.real_time.total_seconds()
    layers = _layers(totals, calls)
    how = "convert_model for the inputs' shapes, compile_model(CPU, f32 hint), PERF_COUNT"
    return _peer_result(layers, wall * 1e3 / calls, how)


def _profile_onnxruntime(model, inputs: tuple, calls: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        session, exporter = _peers.onnxruntime_session(model, inputs, tmp, profile=True)
        feed = _peers.onnxruntime_feed(session, inputs)
        for _ in range(warmup):
            session.run(None, feed)
        start = time.perf_counter()
        for _ in range(calls):
            session.run(None, feed)
        wall = time.perf_counter() - start
        with open(session.end_profiling()) as f:
            events = json.load(f)
    # Only the node times inside the timed runs (the last `calls` model_run events).
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    first = runs[-calls]["ts"] if len(runs) >= calls else 0
    totals = {}
    for e in sorted(events, key=lambda e: e["ts"]):
        if e.get("cat") != "Node" or e["ts"] < first or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"].removesuffix("_kernel_time")
        args = e.get("args", {})
        shapes = [_first_shape(args.get(k)) for k in ("input_type_shape", "output_type_shape")]
        entry = totals.setdefault(name, [args.get("op_name", "?"), 0.0, *shapes])
        entry[1] += e["dur"] * 1e-6
    layers = _layers(totals, calls)
    return _peer_result(layers, wall * 1e3 / calls, f"torch.onnx.export ({exporter} exporter)")


def _peer_result(layers: list, call_ms: float, how: str) -> dict:
    return {
        "how": how,
        "call_ms": call_ms,
        "layers_ms": sum(layer["ms"] for layer in layers),
        "layers": layers,
    }


def _kiln_layers(kiln: dict) -> list:
    """kiln's steps in execution order, as layers."""
    steps = sorted(kiln["steps"], key=lambda s: (s["plan"], s["step"], s["name"]))
    return [
        {
            "name": f"plan {s['plan']}, {s['name']}" + (f": {s['ops']}" if s["ops"] else ""),
            "op": s["name"],
            "category": s["category"],
            "ms": s["ms"],
            "input": s["input"],
            "output": s["output"],
        }
        for s in steps
    ]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def compare(kiln: dict, peers: dict, rows: int) -> str:
    """The peers' slowest layers, then all three side by side: by class of work, and layer by
    layer where the layers match one to one."""
    out = []
    ran = {name: result for name, result in peers.items() if isinstance(result, dict)}
    for name, result in peers.items():
        if not isinstance(result, dict):
            out.append(f"\n{name}: {result}\n")
            continue
        out.append(
            f"\n{name} ({result['how']}): {result['call_ms']:.3f} ms a call with its profiler on, "
            f"{result['layers_ms']:.3f} ms in {len(result['layers'])} layers\n\n"
            "   ms/call  category       layer (type)\n"
        )
        for layer in sorted(result["layers"], key=lambda x: -x["ms"])[:rows]:
            out.append(
                f"{layer['ms']:10.3f}  {layer['category']:<13}  "
                f"{_cut(layer['name'], 90)} ({layer['op']})\n"
            )
    if not ran:
        return "".join(out)
    sides = {"kiln": _kiln_layers(kiln), **{n: r["layers"] for n, r in ran.items()}}
    out.append(_by_category(kiln, ran, sides))
    out.append(_by_layer(sides, rows))
    return "".join(out)


def _by_category(kiln: dict, ran: dict, sides: dict) -> str:
    names = list(sides)
    totals = {n: {} for n in names}
    for n, layers in sides.items():
        for layer in layers:
            totals[n][layer["category"]] = totals[n].get(layer["category"], 0.0) + layer["ms"]
    categories = {c for t in totals.values() for c in t}
    categories = sorted(categories, key=lambda c: -totals["kiln"].get(c, 0))
    head = "".join(f"{n:>14}" for n in names)
    lines = [f"\nside by side, ms per call, by class of work:\n\n  {'class':<14}{head}\n"]
    for c in categories:
        lines.append(f"  {c:<14}" + "".join(f"{totals[n].get(c, 0.0):14.3f}" for n in names) + "\n")
    walls = [kiln["call_ms"]] + [r["call_ms"] for r in ran.values()]
    in_layers = "".join(f"{sum(totals[n].values()):14.3f}" for n in names)
    lines.append(f"  {'in layers':<14}{in_layers}\n")
    lines.append(f"  {'whole call':<14}" + "".join(f"{w:14.3f}" for w in walls) + "\n")
    return "".join(lines)


def _segments(layers: list, anchor: str) -> list:
    """Each `anchor`-class layer with the layers after it, up to the next; what comes before the
    first is left out."""
    segments = []
    for layer in layers:
        if layer["category"] == anchor:
            segments.append({"layer": layer, "ms": 0.0})
        if segments:
            segments[-1]["ms"] += layer["ms"]
    return segments


def _key(layer: dict) -> tuple:
    """What identifies a layer across runtimes: its input's and output's sizes. A convolution's
    channels count in blocks of 16 (ONNX Runtime pads them in its blocked layout); a GEMM's
    leading dims count as their product (OpenVINO flattens them)."""
    def convolution(sizes):
        return (sizes[0], -(-sizes[1] // 16), *sizes[2:]) if len(sizes) == 4 else tuple(sizes)

    def gemm(sizes):
        return (math.prod(sizes[:-1]), sizes[-1]) if sizes else ()

    of = convolution if layer["category"] == "convolution" else gemm
    return of(layer["input"]), of(layer["output"])


def _match(ours: list, theirs: list) -> list:
    """Pairs (i, j) of segments with equal keys, in order: the longest common subsequence, so a
    runtime that runs two independent layers the other way round loses one pair, not the rest."""
    a, b = [_key(s["layer"]) for s in ours], [_key(s["layer"]) for s in theirs]
    best = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            if a[i] == b[j]:
                best[i][j] = best[i + 1][j + 1] + 1
            else:
                best[i][j] = max(best[i + 1][j], best[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _by_layer(sides: dict, rows: int) -> str:
    count = {c: sum(x["category"] == c for x in sides["kiln"]) for c in ("convolution", "gemm")}
    anchor = max(count, key=count.get)  # a ViT's one patch convolution is no skeleton
    if not count[anchor]:
        return "\nlayer by layer: kiln ran no convolution or GEMM to match the peers' layers by\n"
    segments = {n: _segments(layers, anchor) for n, layers in sides.items()}
    peers = [n for n in sides if n != "kiln"]
    matched = {n: dict(_match(segments["kiln"], segments[n])) for n in peers}
    table = []
    for i, own in enumerate(segments["kiln"]):
        cells = [segments[n][matched[n][i]] if i in matched[n] else None for n in peers]
        if all(c is None for c in cells):
            continue
        fastest = min(c["ms"] for c in cells if c)
        # A layer's name: OpenVINO's carries the module path where one survives its passes.
        name = next((c["layer"]["name"] for c in cells if c), own["layer"]["name"])
        table.append((own["ms"] - fastest, i, own["ms"], cells, name, own["layer"]))
    found = ", ".join(f"{n} {len(matched[n])}" for n in peers)
    head = "".join(f"{n:>14}" for n in ["kiln", *peers])
    text = (
        f"\nlayer by layer: each {anchor} with the ops after it up to the next, matched by the "
        f"sizes of its input and output ({found} of kiln's {len(segments['kiln'])} matched); the "
        f"{rows} largest gaps (kiln - fastest peer), ms per call:\n\n"
        f"  {'#':>4}{head}{'gap':>10}  sizes in -> out, layer\n"
    )
    for gap, i, own, cells, name, layer in sorted(table, key=lambda t: -t[0])[:rows]:
        row = f"{own:14.3f}" + "".join(f"{c['ms']:14.3f}" if c else f"{'-':>14}" for c in cells)
        sizes = "x".join(map(str, layer["input"])) + " -> " + "x".join(map(str, layer["output"]))
        text += f"  {i:>4}{row}{gap:10.3f}  {sizes}, {_cut(name.split('/aten::')[0], 50)}\n"
    return text
