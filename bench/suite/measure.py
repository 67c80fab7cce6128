"""The protocol: compile (cold first call), check against eager, warm up, then interleaved
rounds (A B C A B C ...) so that drift on a shared machine hits every backend alike."""

from __future__ import annotations

import contextlib
import statistics
import time
import traceback

import torch

from . import backends

# Where the cases run ("cpu" or "cuda"); bench/run.py --device sets it. On CUDA every timed call
# ends with a synchronize, so a time is the GPU's, not the launch's.
DEVICE = "cpu"


def _on_device(step):
    if DEVICE == "cpu":
        return step

    def synchronized():
        out = step()
        torch.cuda.synchronize()
        return out

    return synchronized


def max_abs_diff(actual, expected) -> float:
    if isinstance(actual, (tuple, list)):
        return max(max_abs_diff(a, e) for a, e in zip(actual, expected))
    return (actual.float() - expected.float()).abs().max().item()


def norm_relative_error(actual, expected) -> float:
    """||actual - expected|| / ||expected|| over every output (0 when both are zero)."""
    if isinstance(actual, (tuple, list)):
        return max(norm_relative_error(a, e) for a, e in zip(actual, expected))
    expected = expected.double()
    scale = expected.norm().item()
    error = (actual.double() - expected).norm().item()
    return error / scale if scale else error


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}"


class Contender:
    """One backend on one case: its step function, compile time, correctness, timings."""

    def __init__(self, backend: str):
        self.backend = backend
        self.step = None
        self.compile_s = None
        self.diff = None
        self.rel_err = None
        self.error = None
        self.note = None
        self.times: list[float] = []

    def row(self, case, eager_median) -> dict:
        median = statistics.median(self.times) * 1e3 if self.times else None
        if self.backend in backends.REDUCED_PRECISION:
            ok = (self.error is None and self.rel_err is not None
                  and self.rel_err <= case.reduced_precision_rtol)
            tolerance = f"norm-relative error above {case.reduced_precision_rtol}"
        else:
            ok = self.error is None and self.diff is not None and self.diff <= case.atol
            tolerance = f"max abs diff above {case.atol}"
        return {
            "model": case.name, "backend": self.backend,
            "median_ms": median,
            "min_ms": min(self.times) * 1e3 if self.times else None,
            "max_ms": max(self.times) * 1e3 if self.times else None,
            # A row that is not ok is never counted as a speedup.
            "speedup_vs_eager": eager_median / median if ok and median and eager_median else None,
            "compile_s": self.compile_s, "max_abs_diff": self.diff, "norm_rel_err": self.rel_err,
            "ok": ok, "error": self.error or (None if ok else tolerance),
            "note": self.note,
        }


def _prepare(contender, case, model, inputs, reference, progress):
    """Builds the step, times its first call (the compile) and checks it against eager."""
    progress(f"{case.name}: {contender.backend} compiling")
    try:
        start = time.perf_counter()
        if case.training:
            step, trained = backends.training_step(contender.backend, model, inputs)
            step()
            contender.compile_s = time.perf_counter() - start
            contender.diff = max(max_abs_diff(p, q) for p, q in
                                 zip(trained.parameters(), reference.parameters()))
        else:
            step = backends.inference_step(contender.backend, model, inputs)
            out = step()
            contender.compile_s = time.perf_counter() - start
            contender.diff = max_abs_diff(out, reference)
            contender.rel_err = norm_relative_error(out, reference)
            contender.note = step.note
        contender.step = _on_device(step)
    except Exception as error:  # the backend fails on this model: its row says why
        contender.error = _first_line(error)
        if "--debug" in __import__("sys").argv:
            traceback.print_exc()


def sgemm_gflops(size: int = 2048, repeats: int = 15) -> float:
    """The machine's float32 matrix-product rate with torch's own GEMM (torch.mm of two size x size
    matrices, median of `repeats`), in GFLOP/s: the practical ceiling of a compute-bound model."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size ** 3 / statistics.median(times) / 1e9


def run_case(case, names, budget_s, progress, gflop: dict | None = None) -> list[dict]:
    """Every backend's row for `case`. With `gflop`, an inference case's eager reference call also
    counts its floating-point operations, in billions (a multiply-add counts two), as
    torch.utils.flop_counter counts them: matrix products and convolutions only, which is what
    bounds a compute-bound model; gflop[case.name] gets them."""
    # Dynamo caches compiled frames per code object (Sequential.forward, ...): without a reset a
    # case could reuse an earlier case's compile, and its compile time would not be cold.
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, inputs = case.build()
    model = model.to(DEVICE)
    inputs = tuple(i.to(DEVICE) for i in inputs)
    if case.training:
        eager_step, reference = backends.training_step("eager", model, inputs)
        eager_step()  # the reference: parameters after one step from the same weights
    else:
        from torch.utils.flop_counter import FlopCounterMode
        counter = FlopCounterMode(display=False) if gflop is not None else contextlib.nullcontext()
        with counter:
            reference = backends.inference_step("eager", model, inputs)()
        if gflop is not None:
            gflop[case.name] = counter.get_total_flops() / 1e9
    contenders = [Contender(name) for name in names]
    for c in contenders:
        if c.backend in backends.TRACED and not case.traceable:
            c.error = "the model does not trace"
            continue
        _prepare(c, case, model, inputs, reference, progress)
    live = [c for c in contenders if c.step is not None]
    # Warm-up, and an estimate of one iteration to size the rounds.
    estimates = {}
    for c in live:
        start = time.perf_counter()
        for _ in range(2):
            c.step()
        estimates[c.backend] = (time.perf_counter() - start) / 2
    rounds = 15
    per_round = budget_s / rounds / max(len(live), 1)
    for r in range(rounds):
        progress(f"{case.name}: round {r + 1}/{rounds}")
        for c in live:
            for _ in range(max(1, int(per_round / max(estimates[c.backend], 1e-7)))):
                start = time.perf_counter()
                c.step()
                c.times.append(time.perf_counter() - start)
    eager = next((c for c in contenders if c.backend == "eager"), None)
    eager_median = statistics.median(eager.times) * 1e3 if eager and eager.times else None
    return [c.row(case, eager_median) for c in contenders]
