"""Runs a generated module through kiln and through eager PyTorch on the same inputs and compares.

Modes:
- `infer`: torch.compile(model.eval(), backend="kiln") under no_grad.
- `train`: one training step under torch.compile(backend="kiln"): outputs, the loss's gradients
  for every parameter and float input, then every parameter's update in one SGD step with
  momentum and every buffer (batch-norm running statistics) after it. SGD, not Adam: Adam's first step is about
  sign(gradient), which turns a 1e-9 difference in a gradient near zero into 2 * lr.
- `stream`: torch.compile(model.eval(), backend="kiln") called under no_grad on a stream of
  batch sizes (the case's own, then STREAM_BATCHES): dynamo makes the batch symbolic after the
  second size, and kiln serves the rest from shape classes (backend/api/shape_classes.h). Each
  call is judged against eager at that batch. The outcome's detail counts the classes and their
  plans (kiln.stats()).
- `trace` / `script`: kiln.compile of torch.jit.trace / torch.jit.script of the eval model (the
  C++ TorchScript path). A module that TorchScript itself cannot script is not kiln's concern:
  that mode is skipped for it.
- `bf16` / `trace_bf16`: torch.compile / kiln.compile of the traced eval model with
  precision="bf16", judged against float32 eager by the norm-relative error of each float
  output, ||kiln - eager|| / ||eager||: at most 4x that of eager's own bf16 autocast
  (torch.autocast("cpu", torch.bfloat16), which rounds more: its products' outputs too), and
  never more than BF16_LIMIT where that is larger (a model whose output cancels); at most
  BF16_FLOOR always passes. An output that is rounding noise (its float64 value is within 10x
  float32 eager's error of zero: a layer norm's output summed over its normalized dim) has no
  digit to judge by: it passes where kiln's RMS error from float64 is at most BF16_FLOOR times
  the output's scale. Where the CPU has no native bf16 (`kiln._C.native_bf16()`), kiln would
  run float32, which `infer` and `trace` check: these modes are skipped. Non-float outputs are not judged (a rounded value may flip an
  argmax).
- `script_stream`: the scripted module through kiln.compile on the same stream of batch sizes:
  the module's second batch compiles a size-generic specialization (a module shape class,
  backend/api/module_classes.h) that later batches run. The detail counts the module's compiles
  and its regions' classes.
- `sides` / `script_sides`: as `stream` / `script_stream`, over a stream of image sizes
  (SIDE_STREAM: multiples of 8, of 16, odd sides, non-square) at the case's own batch; 2-D
  convolutional cases only (the others skip). Sides come in steps of a net's strides
  (docs/shape-classes.md), so these are the streams that exercise steps, floored sizes and the
  import check. A size where eager itself fails (a concatenation of maps that a stride floors
  differently, a linear head over a flattened map) is not judged; a case where eager runs at no
  size of the stream but its own skips.

Tolerance, per dtype, element by element: |kiln - eager| <= atol * scale + rtol * |eager|, where
scale is max(1, max |eager|) over the tensor: float32 rtol 1e-3, atol 1e-4; float64 rtol 1e-7,
atol 1e-10. Integer and bool results must be equal. A float32 tensor that fails this is judged
again against the same computation in float64 (the module and inputs converted): it passes when
kiln's root-mean-square error from that reference is at most 3x eager's own plus atol * scale
(for a tensor of pure rounding noise, whose exact RMS is below 10x eager's error: 10x eager's
plus atol times the largest exact value of the whole step). Gradients that are sums cancelling to nearly zero (a bias before a training-mode
batch norm has a gradient of exactly zero in exact arithmetic) are rounding noise in eager and in
kiln alike; the element test alone would call them failures.
"""

import dataclasses
import hashlib
import inspect
import linecache
import traceback

import torch

import kiln

TOLERANCES = {
    torch.float32: (1e-3, 1e-4),
    torch.float64: (1e-7, 1e-10),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}

MODES = ("infer", "train", "trace", "script", "stream", "script_stream", "bf16", "trace_bf16",
         "sides", "script_sides", "train_stream")

# The bf16 modes' bounds on the norm-relative error (above).
BF16_FACTOR = 4.0
BF16_FLOOR = 2e-2
BF16_LIMIT = 0.5

# After the case's own batch: sizes both sides of it, a size seen before, and 1 (which dynamo
# specializes, as kiln does: a class of its own).
STREAM_BATCHES = (3, 5, 2, 8, 1, 7, 5)
# After the case's own sides (7 to 16): squares in steps of 8 and 16, odd and prime sides (off
# any step), a non-square size, and sizes seen before.
SIDE_STREAM = ((24, 24), (32, 32), (17, 17), (40, 40), (24, 40), (48, 48), (23, 23), (32, 32),
               (16, 16))


@dataclasses.dataclass
class Outcome:
    mode: str
    status: str  # "pass", "fail", "skip"
    detail: str = ""


def mismatch(got, want, what: str, exact=None, step_scale: float = 1.0):
    """Why `got` is not `want` within the tolerance, or None. `exact`: the float64 reference;
    `step_scale`: the largest exact value of all the tensors judged with this one."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{what}: {type(got).__name__} of {len(got)} where eager gives {len(want)}"
        exacts = exact if isinstance(exact, (tuple, list)) else [None] * len(want)
        for i, (g, w, e) in enumerate(zip(got, want, exacts)):
            problem = mismatch(g, w, f"{what}[{i}]", e, step_scale)
            if problem:
                return problem
        return None
    if want is None or not isinstance(want, torch.Tensor):
        return None if got is None or not isinstance(got, torch.Tensor) else f"{what}: unexpected tensor"
    if not isinstance(got, torch.Tensor):
        return f"{what}: got {type(got).__name__}, eager a tensor"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{what}: {got.dtype}{list(got.shape)} where eager gives {want.dtype}{list(want.shape)}"
    if want.dtype not in TOLERANCES:
        return None if torch.equal(got, want) else f"{what}: differs from eager"
    rtol, atol = TOLERANCES[want.dtype]
    g, w = got.detach().double(), want.detach().double()
    if not torch.equal(g.isnan(), w.isnan()):
        return f"{what}: NaN where eager has none, or the reverse"
    g, w = g.nan_to_num(0.0), w.nan_to_num(0.0)
    scale = max(1.0, w.abs().max().item()) if w.numel() else 1.0
    excess = (g - w).abs() - (atol * scale + rtol * w.abs())
    if not w.numel() or excess.max().item() <= 0:
        return None
    at = int(excess.argmax())
    problem = (
        f"{what}: max |kiln - eager| {(g - w).abs().max().item():.3g} (scale {scale:.3g}); "
        f"element {at}: kiln {g.flatten()[at].item():.9g}, eager {w.flatten()[at].item():.9g}"
    )
    if isinstance(exact, torch.Tensor) and exact.shape == want.shape:
        e = exact.detach().double().nan_to_num(0.0)
        rms = lambda t: t.square().mean().sqrt().item()  # noqa: E731
        kiln_error, eager_error = rms(g - e), rms(w - e)
        # Where eager's own error is as large as the exact values, neither result has a correct
        # digit (a sum that cancels to zero, as the gradient of a bias before a training-mode
        # batch norm): the noise depends on the formula (torch's decomposition of the norm's
        # backward, which kiln runs, is noisier than ATen's kernel), and is judged against the
        # scale of the whole step instead.
        noise_only = rms(e) <= 10 * eager_error
        allowed = 3 * eager_error + atol * scale
        if noise_only:
            allowed = 10 * eager_error + atol * max(scale, step_scale)
        if kiln_error <= allowed:
            return None
        problem += f"; RMS error from float64: kiln {kiln_error:.3g}, eager {eager_error:.3g}"
    return problem


def judge(pairs: list, exact=None):
    """The first problem among (what, kiln's, eager's) triples; `exact` maps what -> float64."""
    largest = [v.detach().abs().max().item() for v in (exact or {}).values()
               if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel()]
    step_scale = max([1.0] + largest)
    for what, got, want in pairs:
        problem = mismatch(got, want, what, exact.get(what) if exact else None, step_scale)
        if problem:
            return problem
    return None


def judged_with_reference(pairs: list, reference) -> Outcome:
    """`pairs` judged alone, and again with `reference()` (what -> float64 value) if they fail."""
    problem = judge(pairs)
    if problem:
        try:
            exact = reference()
        except Exception:  # a module that cannot run in float64 keeps the element verdict
            exact = None
        if exact:
            problem = judge(pairs, exact)
    return problem


def as_float64(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    return value


def load(source: str) -> dict:
    # Registered with linecache under a name of its own, so that torch.jit.script finds the
    # source of the generated class as it would a file's.
    filename = f"<generated model {hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "generated_model"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def _compiled(model, inputs: tuple, how: str, options: dict, mode: str):
    """`model` compiled by kiln: through torch.compile where `how` is "infer", else through
    kiln.compile of torch.jit.trace or torch.jit.script (`how`). Where TorchScript itself cannot
    take the module (not kiln's concern), the Outcome that skips `mode` instead."""
    if how == "infer":
        torch._dynamo.reset()
        return torch.compile(model, backend="kiln", options=options)
    try:
        scripted = torch.jit.trace(model, inputs) if how == "trace" else torch.jit.script(model)
    except Exception as e:  # TorchScript's own limits, not kiln's
        reason = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        return Outcome(mode, "skip", f"torch.jit.{how}: {reason.strip()}")
    return kiln.compile(scripted, options=options)


def _run(mode: str, source: str, strict: bool) -> Outcome:
    case = load(source)
    inputs = case["make_inputs"]()
    options = {"strict": True} if strict else {}
    if mode == "train":
        return _train_step(case, inputs, options)
    if mode == "train_stream":
        return _train_stream(case, options)
    if mode in ("stream", "script_stream"):
        return _stream(case, options, mode)
    if mode in ("sides", "script_sides"):
        return _sides_stream(case, options, mode)
    if mode in ("bf16", "trace_bf16"):
        return _bf16(case, inputs, options, mode)
    model = case["make_model"]().eval()
    with torch.no_grad():
        want = model(*inputs)
    compiled = _compiled(model, inputs, mode, options, mode)
    if isinstance(compiled, Outcome):
        return compiled
    with torch.no_grad():
        got = compiled(*inputs)
        again = compiled(*inputs)

    def reference():
        with torch.no_grad():
            exact = case["make_model"]().double().eval()(*map(as_float64, inputs))
        return {"output": exact, "output (second call)": exact}

    pairs = [("output", got, want), ("output (second call)", again, want)]
    problem = judged_with_reference(pairs, reference)
    return Outcome(mode, "fail" if problem else "pass", problem or "")


def _stream(case: dict, options: dict, mode: str) -> Outcome:
    batches = (case["make_inputs"]()[0].shape[0], *STREAM_BATCHES)
    calls = [(f"batch {batch}", lambda batch=batch: case["make_inputs"](batch)) for batch in batches]
    return _judged_stream(case, options, mode, calls, f"batches {list(batches)}")


def _sides_stream(case: dict, options: dict, mode: str) -> Outcome:
    make_inputs = case["make_inputs"]
    if "sides" not in inspect.signature(make_inputs).parameters:
        return Outcome(mode, "skip", "no image input")
    own = tuple(make_inputs()[0].shape[2:])
    sizes = (own, *SIDE_STREAM)
    calls = [(f"sides {h}x{w}", lambda size=(h, w): make_inputs(sides=size)) for h, w in sizes]
    return _judged_stream(case, options, mode, calls, "sides")


def _judged_stream(case: dict, options: dict, mode: str, calls: list, what: str) -> Outcome:
    """Calls the compiled model on each of `calls` ((label, inputs maker)), judging each against
    eager on the same inputs; labels where eager itself raises are not judged."""
    model = case["make_model"]().eval()
    scripted = mode.startswith("script_")
    compiled = _compiled(model, case["make_inputs"](), "script" if scripted else "infer", options, mode)
    if isinstance(compiled, Outcome):
        return compiled
    before = kiln.stats()
    judged, invalid = [], []
    for label, make in calls:
        inputs = make()
        with torch.no_grad():
            try:
                want = model(*inputs)
            except Exception:  # the module's own limits at this size: not kiln's concern
                invalid.append(label)
                continue
            got = compiled(*inputs)

        def reference():
            with torch.no_grad():
                exact = case["make_model"]().double().eval()(*map(as_float64, inputs))
            return {f"output at {label}": exact}

        problem = judged_with_reference([(f"output at {label}", got, want)], reference)
        if problem:
            return Outcome(mode, "fail", problem)
        judged.append(label)
    if len(judged) < 2:
        return Outcome(mode, "skip", f"eager runs at {len(judged)} of the stream's sizes")
    after = kiln.stats()
    classes = after["shape_classes"] - before["shape_classes"]
    plans = after["class_plans"] - before["class_plans"]
    compiles = f"{compiled.num_specializations} module compiles, " if scripted else ""
    if what == "sides":
        what = f"{len(judged)} sides ({len(invalid)} invalid in eager)"
    return Outcome(mode, "pass", f"{what}: {compiles}{classes} classes, {plans} plans")


def _float_outputs(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _float_outputs(v)]
    return []


def norm_relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    g, w = got.detach().double(), want.detach().double()
    return ((g - w).norm() / w.norm().clamp_min(1e-30)).item()


def _bf16(case: dict, inputs: tuple, options: dict, mode: str) -> Outcome:
    if not kiln._C.native_bf16():
        return Outcome(mode, "skip", "this CPU has no native bf16 (precision=bf16 runs float32)")
    model = case["make_model"]().eval()
    options = dict(options, precision="bf16")
    with torch.no_grad():
        want = model(*inputs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = model(*inputs)
        compiled = _compiled(model, inputs, "infer" if mode == "bf16" else "trace", options, mode)
        if isinstance(compiled, Outcome):
            return compiled
        got = compiled(*inputs)
    wants, gots, autocasts = map(_float_outputs, (want, got, autocast))
    if len(gots) != len(wants):
        return Outcome(mode, "fail", f"{len(gots)} float outputs where eager gives {len(wants)}")
    errors = []
    for i, (g, w, a) in enumerate(zip(gots, wants, autocasts)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return Outcome(mode, "fail", f"output {i}: {g.dtype}{list(g.shape)} where eager "
                                         f"gives {w.dtype}{list(w.shape)}")
        if not torch.equal(g.isnan(), w.isnan()):
            return Outcome(mode, "fail", f"output {i}: NaN where eager has none, or the reverse")
        g, w, a = (t.nan_to_num(0.0) for t in (g, w, a.to(w.dtype)))
        error, eager_error = norm_relative_error(g, w), norm_relative_error(a, w)
        allowed = max(BF16_FLOOR, min(BF16_FACTOR * eager_error, BF16_LIMIT))
        if error > allowed and not _bf16_noise_passes(case, inputs, i, g, w):
            return Outcome(mode, "fail", f"output {i}: norm-relative error {error:.3g} from float32"
                                         f" eager, above {allowed:.3g} (eager's bf16 autocast: "
                                         f"{eager_error:.3g})")
        errors.append(f"{error:.2g}" if error <= allowed else "noise")
    return Outcome(mode, "pass", "error " + ", ".join(errors))


def _bf16_noise_passes(case: dict, inputs: tuple, index: int, got, want) -> bool:
    """Whether float output `index` is rounding noise that `got` stays within (above)."""
    try:
        with torch.no_grad():
            exact = case["make_model"]().double().eval()(*map(as_float64, inputs))
    except Exception:  # a module that cannot run in float64: the relative verdict stands
        return False
    exact = _float_outputs(exact)[index].nan_to_num(0.0)
    rms = lambda t: t.double().square().mean().sqrt().item()  # noqa: E731
    if rms(exact) > 10 * rms(want.double() - exact):
        return False
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    return rms(got.double() - exact) <= BF16_FLOOR * scale


def _step(module, call, args, update: bool = True) -> dict:
    """One training step of `module` through `call`: its output, its parameters' and float
    inputs' gradients (a fixed random projection of the output backpropagated), and where
    `update`, each parameter's update in one SGD step with momentum and the buffers after it."""
    args = [x.clone().requires_grad_(x.is_floating_point()) for x in args]
    out = call(*args)
    projection = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * projection.to(out.dtype)).sum().backward()
    values = {"output": out}
    values.update({f"gradient of {n}": p.grad for n, p in module.named_parameters()})
    values.update({f"gradient of input {i}": a.grad for i, a in enumerate(args)})
    if not update:
        for p in module.parameters():
            p.grad = None
        return values
    parameters = [p for p in module.parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    if parameters:
        torch.optim.SGD(parameters, lr=0.05, momentum=0.9).step()
    # The update, not the parameter after it: its error is the gradient's, judged alike.
    for name, value in module.named_parameters():
        values[f"{name}'s update in one SGD step"] = value.detach() - before[name]
    for name, value in module.named_buffers():
        values[f"{name} after one step"] = value
    return values


def _train_step(case: dict, inputs: tuple, options: dict) -> Outcome:
    reference, model = case["make_model"]().train(), case["make_model"]().train()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="kiln", options=options)
    want = _step(reference, reference, inputs)
    got = _step(model, compiled, inputs)

    def float64_step():
        exact = case["make_model"]().double().train()
        return _step(exact, exact, [as_float64(x) for x in inputs])

    pairs = [(what, got[what], value) for what, value in want.items()]
    problem = judged_with_reference(pairs, float64_step)
    return Outcome("train", "fail" if problem else "pass", problem or "")


def _train_stream(case: dict, options: dict) -> Outcome:
    """The case trained through torch.compile over the batch stream: at each batch its output and
    every gradient against eager's (no update between the calls, so each is judged alone; dynamo
    makes the forward and backward symbolic from the second batch, and kiln's classes serve
    them). Batches where eager itself raises (a training batch norm over one value) are not
    judged."""
    reference, model = case["make_model"]().train(), case["make_model"]().train()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="kiln", options=options)
    before = kiln.stats()
    batches = (case["make_inputs"]()[0].shape[0], *STREAM_BATCHES)
    judged = []
    for batch in batches:
        inputs = case["make_inputs"](batch)
        try:
            want = _step(reference, reference, inputs, update=False)
        except Exception:  # the module's own limits at this batch: not kiln's concern
            continue
        got = _step(model, compiled, inputs, update=False)

        def float64_step():
            exact = case["make_model"]().double().train()
            values = _step(exact, exact, [as_float64(x) for x in inputs], update=False)
            return {f"{what} at batch {batch}": value for what, value in values.items()}

        pairs = [(f"{what} at batch {batch}", got[what], value) for what, value in want.items()]
        problem = judged_with_reference(pairs, float64_step)
        if problem:
            return Outcome("train_stream", "fail", problem)
        judged.append(batch)
    if len(judged) < 2:
        return Outcome("train_stream", "skip", f"eager trains at {len(judged)} of the batches")
    after = kiln.stats()
    classes = after["shape_classes"] - before["shape_classes"]
    plans = after["class_plans"] - before["class_plans"]
    fallbacks = after["fallbacks"] - before["fallbacks"]
    return Outcome("train_stream", "pass",
                   f"batches {judged}: {classes} classes, {plans} plans, {fallbacks} fallbacks")


def check(source: str, modes, strict: bool = False) -> list:
    """One Outcome per mode. An error eager raises as well makes the case invalid ("skip")."""
    outcomes = []
    for mode in modes:
        try:
            outcomes.append(_run(mode, source, strict))
        except Exception:
            outcomes.append(Outcome(mode, "fail", traceback.format_exc(limit=-4)))
    return outcomes


def eager_runs(source: str, trainable: bool) -> str:
    """Why eager cannot run the case (a generator bug), or ''."""
    try:
        case = load(source)
        model = case["make_model"]()
        with torch.no_grad():
            model.eval()(*case["make_inputs"]())
        if trainable:
            # Float inputs need their gradient, as in the training step: eager PyTorch 2.11
            # crashes in GroupNorm's CPU backward on a channels-last input that needs none.
            args = [x.requires_grad_(x.is_floating_point()) for x in case["make_inputs"]()]
            model.train()(*args).float().sum().backward()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return ""


def reproducer(source: str, mode: str, detail: str) -> str:
    """A self-contained script: the module, its inputs and the check that failed."""
    call = {
        "infer": 'compiled = torch.compile(model.eval(), backend="kiln", options=STRICT)',
        "trace": "compiled = kiln.compile(torch.jit.trace(model.eval(), inputs), options=STRICT)",
        "script": "compiled = kiln.compile(torch.jit.script(model.eval()), options=STRICT)",
        "bf16": 'compiled = torch.compile(model.eval(), backend="kiln", options=BF16)',
        "trace_bf16":
            "compiled = kiln.compile(torch.jit.trace(model.eval(), inputs), options=BF16)",
    }.get(mode)
    lines = [f"# kiln model fuzzer: mode {mode}", "# " + detail.replace("\n", "\n# "), source]
    if call:
        lines.append(
            "if __name__ == '__main__':\n"
            "    import kiln\n"
            "    STRICT = {'strict': True}\n"
            "    BF16 = {'strict': True, 'precision': 'bf16'}\n"
            "    model, inputs = make_model(), make_inputs()\n"
            "    with torch.no_grad():\n"
            "        want = model.eval()(*inputs)\n"
            f"        {call}\n"
            "        got = compiled(*inputs)\n"
            "    print('max |kiln - eager|:', (got - want).abs().max().item())\n"
        )
    else:
        what, runner = {"train": ("Training step", "_train_step"),
                        "train_stream": ("Training over batch sizes", "_train_stream")}.get(
                            mode, ("Stream of sizes", "_judged_stream"))
        lines.append(
            f"# {what}: tests/fuzz_models/differential.py ({runner}) runs it; with the\n"
            f"# kiln checkout: python tests/fuzz_models/run.py --file THIS_FILE --modes {mode}\n"
        )
    return "\n".join(lines)

