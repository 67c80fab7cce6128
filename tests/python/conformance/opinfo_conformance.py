"""OpInfo conformance: PyTorch's own samples for every op kiln generates kernels for, run
through the kiln backend (strict, so nothing falls back silently) and compared with eager.

    python tests/python/conformance/opinfo_conformance.py [--max-samples N] [--ops a,b]

prints one row per (OpInfo, dtype): samples, passed, failed, and how many of them ran in a
kiln kernel; exits non-zero on any failure. `make test` runs it with a few samples per row
(tests/python/conformance/test_opinfo.py); `make conformance` runs every sample.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

import kiln

# kiln's native ops (kiln._C.native_ops()) -> the OpInfos whose samples reach them after
# AOTAutograd's core ATen decomposition.
OPINFOS_FOR = {
    "aten::_log_softmax": ["log_softmax"],
    "aten::_softmax": ["softmax"],
    "aten::_to_copy": ["to"],
    "aten::abs": ["abs"],
    "aten::add.Scalar": ["add"],
    "aten::add.Tensor": ["add"],
    "aten::amax": ["amax"],
    "aten::amin": ["amin"],
    "aten::celu": ["nn.functional.celu"],
    "aten::clamp": ["clamp"],
    "aten::clone": ["clone"],
    "aten::clamp_max": ["clamp_max"],
    "aten::clamp_min": ["clamp_min"],
    "aten::div.Scalar": ["div"],
    "aten::div.Tensor": ["div"],
    "aten::div.Tensor_mode": ["div"],
    "aten::eq.Scalar": ["eq"],
    "aten::eq.Tensor": ["eq"],
    "aten::erf": ["erf"],
    "aten::exp": ["exp"],
    "aten::elu": ["nn.functional.elu", "nn.functional.selu", "nn.functional.celu"],
    "aten::expm1": ["expm1"],
    "aten::ge.Scalar": ["ge"],
    "aten::ge.Tensor": ["ge"],
    "aten::gelu": ["nn.functional.gelu"],
    "aten::gt.Scalar": ["gt"],
    "aten::gt.Tensor": ["gt"],
    "aten::hardtanh": ["nn.functional.hardtanh"],
    "aten::hardsigmoid": ["nn.functional.hardsigmoid"],
    "aten::hardswish": ["nn.functional.hardswish"],
    "aten::layer_norm": ["nn.functional.layer_norm"],
    "aten::le.Scalar": ["le"],
    "aten::le.Tensor": ["le"],
    "aten::leaky_relu": ["nn.functional.leaky_relu"],
    "aten::linear": ["nn.functional.linear"],
    "aten::log": ["log"],
    "aten::log1p": ["log1p", "nn.functional.softplus", "nn.functional.mish"],
    "aten::log_softmax.int": ["log_softmax"],
    "aten::lt.Scalar": ["lt"],
    "aten::lt.Tensor": ["lt"],
    "aten::mean": ["mean"],
    "aten::mean.dim": ["mean"],
    "aten::maximum": ["maximum"],
    "aten::minimum": ["minimum"],
    "aten::mish": ["nn.functional.mish"],
    "aten::mul.Scalar": ["mul"],
    "aten::mul.Tensor": ["mul"],
    "aten::ne.Scalar": ["ne"],
    "aten::ne.Tensor": ["ne"],
    "aten::neg": ["neg"],
    "aten::pow.Tensor_Scalar": ["pow"],
    "aten::reciprocal": ["reciprocal"],
    "aten::relu": ["nn.functional.relu"],
    "aten::rsqrt": ["rsqrt"],
    "aten::rsub.Scalar": ["rsub"],
    "aten::rsub.Tensor": ["rsub"],
    "aten::sigmoid": ["sigmoid"],
    "aten::silu": ["nn.functional.silu"],
    "aten::sign": ["sign"],
    "aten::selu": ["nn.functional.selu"],
    "aten::softmax.int": ["softmax"],
    "aten::softplus": ["nn.functional.softplus"],
    "aten::sqrt": ["sqrt"],
    "aten::std": ["std"],
    "aten::std.correction": ["std"],
    "aten::std.dim": ["std"],
    "aten::sub.Scalar": ["sub"],
    "aten::sub.Tensor": ["sub"],
    "aten::sum": ["sum"],
    "aten::sum.dim_IntList": ["sum"],
    "aten::tanh": ["tanh"],
    "aten::to.dtype": ["to"],
    "aten::type_as": ["to"],
    "aten::var": ["var"],
    "aten::var.correction": ["var"],
    "aten::var.dim": ["var"],
    "aten::where.self": ["where"],
}

# The dtypes kiln claims (docs/codegen-cpu.md, "dtypes").
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.bool]

# Stated tolerances against eager (rtol, atol); integer and boolean results are exact.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}


def _opinfos(names):
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = set(names)
    return [op for op in op_db if op.name in wanted and op.variant_test_name != "complex"]


def _run_sample(opinfo, sample):
    """Compiles this sample through kiln's backend; returns (eager result, kiln result)."""
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i] for i in positions]

    def call(*ts):
        filled = list(leaves)
        for i, t in zip(positions, ts):
            filled[i] = t
        first, args, kwargs = pytree.tree_unflatten(filled, spec)
        return (opinfo.op(first, *args, **kwargs),)  # AOTAutograd wants tuple outputs

    expected = call(*[t.clone() for t in tensors])[0]
    graph = make_fx(call)(*tensors)
    compiled = kiln.backend(graph, tensors, options={"strict": True})
    return expected, compiled(*tensors)[0]


def _compare(expected, actual):
    # By the result's dtype: softmax(int32 input, dtype=float64) is a float64 result.
    rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True,
                               check_dtype=True, check_stride=False)


def run(max_samples=None, only=None, out=sys.stdout):
    """Runs the samples; returns {(opinfo name, variant, dtype): (samples, passed, in_kernels,
    [failure messages])} and prints the table."""
    names = sorted({n for ops in OPINFOS_FOR.values() for n in ops})
    if only:
        names = [n for n in names if n in only]
    results = {}
    torch.manual_seed(0)
    for opinfo in _opinfos(names):
        supported = opinfo.supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype not in supported:
                continue
            samples = passed = in_kernels = 0
            failures = []
            for sample in opinfo.sample_inputs("cpu", dtype, requires_grad=False):
                if max_samples is not None and samples >= max_samples:
                    break
                samples += 1
                before = kiln.stats()["kernels"]
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected, actual = _run_sample(opinfo, sample)
                    _compare(expected, actual)
                    passed += 1
                    in_kernels += kiln.stats()["kernels"] > before
                except Exception as error:  # a failure is reported with its sample, not raised
                    failures.append(f"{sample.summary() if hasattr(sample, 'summary') else sample}: "
                                    f"{type(error).__name__}: {str(error).splitlines()[0][:300]}")
            key = (opinfo.name, opinfo.variant_test_name, str(dtype).replace("torch.", ""))
            results[key] = (samples, passed, in_kernels, failures)
            label = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
            print(f"{label:32} {key[2]:9} samples {samples:3}  passed {passed:3}  "
                  f"in kernels {in_kernels:3}  failed {len(failures)}", file=out)
            for failure in failures[:3]:
                print(f"    FAIL {failure}", file=out)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-samples", type=int, default=None,
                        help="samples per (OpInfo, dtype); default: all")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    args = parser.parse_args(argv)
    start = time.time()
    results = run(args.max_samples, set(filter(None, args.ops.split(","))))
    total = sum(r[0] for r in results.values())
    passed = sum(r[1] for r in results.values())
    kernels = sum(r[2] for r in results.values())
    print(f"\n{len(results)} (OpInfo, dtype) rows, {total} samples: {passed} passed, "
          f"{total - passed} failed, {kernels} ran in kiln kernels ({time.time() - start:.0f} s)")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
