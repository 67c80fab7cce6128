// The harness of the code generator tests: buffers filled per dtype, kernels compiled and run
// against the reference interpreter at every vector width the host runs, tolerances.
//
// Kernels compiled by the LLVM code generator, run and compared with the reference interpreter
// (the oracle) on copies of the same inputs, at every vector width the host runs.
//
// Tolerances (float outputs; integer and bool outputs are always exact, NaN must meet NaN with any
// payload, +0 equals -0):
//   - exact: copies, casts, +, -, *, /, max, min, floor, trunc, neg, abs, sqrt, reciprocal, where,
//     comparisons, and the same ops on float16/bfloat16 (computed in float32 and rounded once:
//     float32 has more than 2p+2 bits, so that double rounding is innocuous);
//   - float32 exp/log/tanh/erf/sigmoid: the ulp bounds of backend/codegen/llvm/math.h; rsqrt:
//     2 ulp (1/sqrt(x) rounds twice in float32); float16/bfloat16 results of these: 1 ulp of that
//     format; float64 ones: exact (the codegen and the interpreter both call the C library);
//   - a multiply feeding an add may become one FMA: see MultiplyAddMayFuseIntoOneRounding;
//   - float sums: the codegen adds in at least `lanes` = vector_bits/32 independent partial sums,
//     so |got - want| <= (n/lanes + log2(lanes) + 3) * u * sum|x_i| (u = 2^-24 for float32, the
//     recursive-summation bound); kernels built on sums state theirs next to the kernel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backend/codegen/llvm/compile_kernels.h"
#include "backend/codegen/llvm/math.h"
#include "backend/codegen/llvm/schedule.h"
#include "kiln/error.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/printer.h"
#include "passes/kernel/scalar_convert.h"
#include "runtime/jit/orc_jit.h"
#include "tests/support/kernel_buffers.h"
#include "tests/support/kernel_maker.h"

namespace kiln::codegen {
namespace codegen_test {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;
using kernel::ReduceKind;
using Bytes = std::vector<uint8_t>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU32 = 0x1p-24;  // unit roundoff of float32

constexpr DType F32 = DType::Float32, F64 = DType::Float64, F16 = DType::Float16,
                BF16 = DType::BFloat16, I32 = DType::Int32, I64 = DType::Int64, I8 = DType::Int8,
                U8 = DType::UInt8, B8 = DType::Bool;

// ---- Values in buffers -------------------------------------------------------------------------

inline constexpr auto& put = kiln::testing::put_element;
inline constexpr auto& get = kiln::testing::get_element;

// Floats as integers ordered like the floats, so that neighbours differ by one.
inline int64_t ordered(DType t, const uint8_t* p) {
  const int64_t size = ir::dtype_size(t);
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);
  const uint64_t sign = uint64_t{1} << (size * 8 - 1);
  const auto magnitude = static_cast<int64_t>(bits & (sign - 1));
  return bits & sign ? -magnitude : magnitude;
}

using kiln::testing::buffer_elements;

// Fills an input buffer of `n` elements of dtype `t`.
using Fill = std::function<Bytes(DType t, int64_t n, std::mt19937_64& rng)>;

/// Uniform values in [lo, hi] (integers when `integral`), with `specials` at scattered places.
inline Fill uniform(double lo, double hi, std::vector<double> specials = {},
                    bool integral = false) {
  return [=](DType t, int64_t n, std::mt19937_64& rng) {
    Bytes b(n * ir::dtype_size(t));
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < n; ++i) {
      const double v = dist(rng);
      put(t, &b[i * ir::dtype_size(t)], integral ? std::round(v) : v);
    }
    const int64_t shift = static_cast<int64_t>(rng() % 97);
    for (size_t k = 0; k < specials.size() && n > 0; ++k)
      put(t, &b[((static_cast<int64_t>(k) * 37 + shift) % n) * ir::dtype_size(t)], specials[k]);
    return b;
  };
}

inline Fill ints(double lo, double hi) {
  return uniform(lo, hi, {}, true);
}

/// Random bit patterns: every integer of the dtype, or any float including NaN and infinity.
inline Fill random_bits() {
  return [](DType t, int64_t n, std::mt19937_64& rng) {
    Bytes b(n * ir::dtype_size(t));
    for (auto& byte : b)
      byte = static_cast<uint8_t>(rng());
    if (t == DType::Bool)
      for (auto& byte : b)
        byte &= 1;
    return b;
  };
}

const std::vector<double> kFloatSpecials = {0.0,   -0.0, kInf,  -kInf, kNaN,   1e-40, -1e-40, 1e30,
                                            -1e30, 88.0, -88.0, 100.0, -100.0, 0.5,   1.0,    -1.0};

// ---- Cases and the harness ---------------------------------------------------------------------

struct Tolerance {
  double ulp = 0;  // in units of the output dtype's last place
  double rel = 0;  // or |got - want| <= rel * |want| + abs
  double abs = 0;
};
using ToleranceFor = std::function<Tolerance(int vector_bits)>;

inline Tolerance exact(int) {
  return {};
}
inline ToleranceFor ulps(double n) {
  return [n](int) { return Tolerance{n, 0, 0}; };
}

/// The bound on a float32 sum of n terms whose magnitudes add up to at most `magnitude`.
inline double sum_error(int vector_bits, int64_t n, double magnitude, double unit = kU32) {
  const int lanes = vector_bits / 32;
  const auto count = static_cast<double>(n);
  // Along a row: `lanes` partial sums folded at the end. Across rows (schedule.h), each lane
  // adds its row's elements in chunks of 16 (one after another below 32 elements).
  const double along = count / lanes + std::log2(lanes);
  const double across = n < 32 ? count : count / 16 + 16;
  return (std::max(along, across) + 3) * unit * magnitude;
}

struct Case {
  Kernel kernel;
  std::vector<Bytes> inputs;
  ToleranceFor tolerance = exact;
};

/// `fills` holds one Fill per input buffer, or one for all.
inline Case make_case(Kernel k, std::vector<Fill> fills, ToleranceFor tolerance = exact) {
  static uint64_t seed = 1;
  std::mt19937_64 rng(seed++);
  Case c{std::move(k), {}, std::move(tolerance)};
  for (int i = 0; i < c.kernel.num_inputs(); ++i) {
    const Fill& fill = fills.size() == 1 ? fills[0] : fills.at(i);
    c.inputs.push_back(fill(c.kernel.buffers[i].dtype, buffer_elements(c.kernel, i), rng));
  }
  return c;
}

using kiln::testing::make_kernel;

/// Every buffer of a case: its inputs, then outputs filled with a marker byte.
inline std::vector<Bytes> fresh_buffers(const Case& c) {
  std::vector<Bytes> buffers = c.inputs;
  for (size_t i = c.inputs.size(); i < c.kernel.buffers.size(); ++i) {
    const DType t = c.kernel.buffers[i].dtype;
    buffers.emplace_back(buffer_elements(c.kernel, static_cast<int>(i)) * ir::dtype_size(t), 0x5a);
  }
  return buffers;
}

inline std::vector<void*> pointers(std::vector<Bytes>& buffers) {
  std::vector<void*> p;
  for (auto& b : buffers)
    p.push_back(b.data());
  return p;
}

inline bool close(DType t, const uint8_t* want, const uint8_t* got, const Tolerance& tol) {
  if (!ir::is_floating(t)) return std::memcmp(want, got, ir::dtype_size(t)) == 0;
  const double w = get(t, want), g = get(t, got);
  if (std::isnan(w) || std::isnan(g)) return std::isnan(w) && std::isnan(g);
  if (w == g) return true;
  if (std::llabs(ordered(t, want) - ordered(t, got)) <= tol.ulp) return true;
  return std::fabs(g - w) <= tol.rel * std::fabs(w) + tol.abs;
}

/// Compares the outputs; a failure names the case, the run and the first mismatches.
inline void expect_same_outputs(const Case& c, const std::vector<Bytes>& want,
                                const std::vector<Bytes>& got, const std::string& run, int bits) {
  const Tolerance tol = c.tolerance(bits);
  for (size_t b = c.inputs.size(); b < want.size(); ++b) {
    const DType t = c.kernel.buffers[b].dtype;
    const int64_t size = ir::dtype_size(t);
    std::ostringstream why;
    int bad = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(want[b].size()) / size; ++i) {
      if (close(t, &want[b][i * size], &got[b][i * size], tol)) continue;
      if (bad++ < 6)
        why << "  b" << b << "[" << i << "]: want " << get(t, &want[b][i * size]) << ", got "
            << get(t, &got[b][i * size]) << "\n";
    }
    if (bad > 0)
      ADD_FAILURE() << c.kernel.name << " (" << run << ", vector_bits " << bits << "): " << bad
                    << " of " << want[b].size() / size << " elements of b" << b << " differ\n"
                    << why.str() << kernel::print_kernel(c.kernel);
  }
}

inline std::vector<int> vector_widths() {
  std::vector<int> widths = {128, 256};
  const std::string features = "," + jit::host_target().features + ",";
  if (features.find(",+avx512f,") != std::string::npos) {
    widths.push_back(512);
  } else {
    static bool said = false;
    if (!std::exchange(said, true))
      std::cout << "[ NOTE ] no AVX-512 on this host: 512-bit runs skipped\n";
  }
  return widths;
}

enum class Split { Whole, Pieces };

/// Uneven cuts of [0, range): [0,1), [1,r/3+1), [r/3+1, 2r/3+3), [2r/3+3, r), clamped (some pieces
/// may be empty, which must write nothing).
inline std::vector<int64_t> cuts(int64_t range) {
  auto at = [&](int64_t x) { return std::min(range, x); };
  return {0, at(1), at(range / 3 + 1), at(2 * range / 3 + 3), range};
}

/// Every kernel check() saw in this process: cuda_compile_environment.cpp renders them to CUDA C
/// and compiles them with NVRTC when the tests end.
inline std::vector<Kernel>& checked_kernels() {
  static std::vector<Kernel> kernels;
  return kernels;
}

/// Compiles all cases into one module per vector width and checks each against the interpreter.
inline void check(const std::vector<Case>& cases, Split split = Split::Whole) {
  std::vector<Kernel> kernels;
  // As the pipeline's split_reductions pass does: the reductions the CPU splits.
  for (const Case& c : cases) {
    kernels.push_back(c.kernel);
    kernels.back().split_pieces = reduction_pieces(collapse_dims(c.kernel));
  }
  checked_kernels().insert(checked_kernels().end(), kernels.begin(), kernels.end());
  std::vector<std::vector<Bytes>> want;
  for (const Case& c : cases) {
    want.push_back(fresh_buffers(c));
    kernel::interpret(c.kernel, pointers(want.back()));
  }
  for (int bits : vector_widths()) {
    CodegenOptions options;
    options.vector_bits = bits;
    const CompiledKernels compiled = compile_kernels(kernels, options);
    ASSERT_EQ(compiled.kernels.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const CompiledKernel& fn = compiled.kernels[i];
      const Kernel collapsed = collapse_dims(c.kernel);
      int64_t numel = 1;
      for (int64_t s : c.kernel.sizes)
        numel *= s;
      int64_t range = c.kernel.reduce_rank ? collapsed.num_rows() : numel;
      if (const auto split = split_reduction(collapsed)) range = split->pieces * split->rows;
      if (transposes(collapsed)) {  // tiles of rows of the next-to-innermost dim
        const int rank = collapsed.rank();
        range = numel / (collapsed.sizes[rank - 1] * collapsed.sizes[rank - 2]) *
                ((collapsed.sizes[rank - 2] + kTransposeTileRows - 1) / kTransposeTileRows);
      }
      EXPECT_EQ(fn.range, range) << c.kernel.name;
      std::vector<Bytes> got = fresh_buffers(c);
      const std::vector<void*> p = pointers(got);
      run_compiled_kernel(fn, p, split == Split::Whole ? std::vector<int64_t>{} : cuts(fn.range));
      expect_same_outputs(c, want[i], got, split == Split::Whole ? "whole range" : "in pieces",
                          bits);
    }
  }
}

// ---- Kernel shapes used by many tests ----------------------------------------------------------

constexpr int64_t kN = 531;  // 33 * 16 + 3: a tail at every vector width

inline Kernel unary_kernel(Op op, DType t, int64_t n = kN) {
  Kernel k =
      make_kernel(std::string(kernel::op_name(op)) + "_" + ir::dtype_name(t), {n}, 0, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1}, b.unary(op, b.load(0, {1}), t));
  return k;
}

inline Kernel binary_kernel(Op op, DType arg, DType out, int64_t n = kN) {
  Kernel k = make_kernel(std::string(kernel::op_name(op)) + "_" + ir::dtype_name(arg), {n}, 0,
                         {arg, arg}, {out});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(op, b.load(0, {1}), b.load(1, {1}), out));
  return k;
}

inline Kernel cast_kernel(DType from, DType to, int64_t n = kN) {
  Kernel k = make_kernel(std::string("cast_") + ir::dtype_name(from) + "_to_" + ir::dtype_name(to),
                         {n}, 0, {from}, {to});
  KernelBuilder b(k);
  b.store(1, {1}, b.cast(b.load(0, {1}), to));
  return k;
}

/// [rows, n] reducing the last dim of b0 into b1.
inline Kernel reduce_kernel(ReduceKind kind, DType t, int64_t rows, int64_t n) {
  Kernel k =
      make_kernel(std::string("reduce_") + kernel::reduce_kind_name(kind) + "_" +
                      ir::dtype_name(t) + "_" + std::to_string(rows) + "x" + std::to_string(n),
                  {rows, n}, 1, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(kind, b.load(0, {n, 1})));
  return k;
}

}  // namespace codegen_test
}  // namespace kiln::codegen
