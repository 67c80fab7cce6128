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
#include "kiln/error.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/printer.h"
#include "passes/kernel/scalar_convert.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::codegen {
namespace {

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

void put(DType t, uint8_t* p, double v) {
  auto as = [&](auto x) { std::memcpy(p, &x, sizeof x); };
  auto integer = [&] { return static_cast<int64_t>(v); };  // only for integer dtypes: v is finite
  if (t == F32) return as(static_cast<float>(v));
  if (t == F64) return as(v);
  if (t == F16) return as(kernel::half_from_float(static_cast<float>(v)));
  if (t == BF16) return as(kernel::bfloat16_from_float(static_cast<float>(v)));
  if (t == B8) return as(static_cast<uint8_t>(v != 0));
  if (t == U8) return as(static_cast<uint8_t>(integer()));
  if (t == I8) return as(static_cast<int8_t>(integer()));
  if (t == I32) return as(static_cast<int32_t>(integer()));
  if (t == I64) return as(integer());
  FAIL() << "no test values for " << ir::dtype_name(t);
}

double get(DType t, const uint8_t* p) {
  auto as = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  auto bits16 = [&] { return static_cast<uint16_t>(p[0] | p[1] << 8); };  // little-endian host
  if (t == F32) return as(float{});
  if (t == F64) return as(double{});
  if (t == F16) return kernel::float_from_half(bits16());
  if (t == BF16) return kernel::float_from_bfloat16(bits16());
  if (t == B8 || t == U8) return as(uint8_t{});
  if (t == I8) return as(int8_t{});
  if (t == I32) return as(int32_t{});
  if (t == I64) return as(int64_t{});
  return kNaN;
}

// Floats as integers ordered like the floats, so that neighbours differ by one.
int64_t ordered(DType t, const uint8_t* p) {
  const int64_t size = ir::dtype_size(t);
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);
  const uint64_t sign = uint64_t{1} << (size * 8 - 1);
  const auto magnitude = static_cast<int64_t>(bits & (sign - 1));
  return bits & sign ? -magnitude : magnitude;
}

/// Elements a buffer needs so that every map of the kernel on it stays inside.
int64_t buffer_elements(const Kernel& k, int buffer) {
  int64_t n = 1;
  auto visit = [&](const kernel::IndexMap& m) {
    if (m.buffer != buffer) return;
    int64_t last = m.offset;
    for (int d = 0; d < k.rank(); ++d)
      last += std::max<int64_t>(k.sizes[d] - 1, 0) * m.strides[d];
    n = std::max(n, last + 1);
  };
  for (const auto& e : k.exprs)
    if (e.op == Op::Load) visit(e.map);
  for (const auto& s : k.stores)
    visit(s.map);
  return n;
}

// Fills an input buffer of `n` elements of dtype `t`.
using Fill = std::function<Bytes(DType t, int64_t n, std::mt19937_64& rng)>;

/// Uniform values in [lo, hi] (integers when `integral`), with `specials` at scattered places.
Fill uniform(double lo, double hi, std::vector<double> specials = {}, bool integral = false) {
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

Fill ints(double lo, double hi) {
  return uniform(lo, hi, {}, true);
}

/// Random bit patterns: every integer of the dtype, or any float including NaN and infinity.
Fill random_bits() {
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

Tolerance exact(int) {
  return {};
}
ToleranceFor ulps(double n) {
  return [n](int) { return Tolerance{n, 0, 0}; };
}

/// The bound on a float32 sum of n terms whose magnitudes add up to at most `magnitude`.
double sum_error(int vector_bits, int64_t n, double magnitude, double unit = kU32) {
  const int lanes = vector_bits / 32;
  return (static_cast<double>(n) / lanes + std::log2(lanes) + 3) * unit * magnitude;
}

struct Case {
  Kernel kernel;
  std::vector<Bytes> inputs;
  ToleranceFor tolerance = exact;
};

/// `fills` holds one Fill per input buffer, or one for all.
Case make_case(Kernel k, std::vector<Fill> fills, ToleranceFor tolerance = exact) {
  static uint64_t seed = 1;
  std::mt19937_64 rng(seed++);
  Case c{std::move(k), {}, std::move(tolerance)};
  for (int i = 0; i < c.kernel.num_inputs(); ++i) {
    const Fill& fill = fills.size() == 1 ? fills[0] : fills.at(i);
    c.inputs.push_back(fill(c.kernel.buffers[i].dtype, buffer_elements(c.kernel, i), rng));
  }
  return c;
}

Kernel make_kernel(std::string name, std::vector<int64_t> sizes, int reduce_rank,
                   std::vector<DType> inputs, std::vector<DType> outputs) {
  Kernel k;
  k.name = std::move(name);
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  for (DType t : inputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, false});
  for (DType t : outputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, true});
  return k;
}

/// Every buffer of a case: its inputs, then outputs filled with a marker byte.
std::vector<Bytes> fresh_buffers(const Case& c) {
  std::vector<Bytes> buffers = c.inputs;
  for (size_t i = c.inputs.size(); i < c.kernel.buffers.size(); ++i) {
    const DType t = c.kernel.buffers[i].dtype;
    buffers.emplace_back(buffer_elements(c.kernel, static_cast<int>(i)) * ir::dtype_size(t), 0x5a);
  }
  return buffers;
}

std::vector<void*> pointers(std::vector<Bytes>& buffers) {
  std::vector<void*> p;
  for (auto& b : buffers)
    p.push_back(b.data());
  return p;
}

bool close(DType t, const uint8_t* want, const uint8_t* got, const Tolerance& tol) {
  if (!ir::is_floating(t)) return std::memcmp(want, got, ir::dtype_size(t)) == 0;
  const double w = get(t, want), g = get(t, got);
  if (std::isnan(w) || std::isnan(g)) return std::isnan(w) && std::isnan(g);
  if (w == g) return true;
  if (std::llabs(ordered(t, want) - ordered(t, got)) <= tol.ulp) return true;
  return std::fabs(g - w) <= tol.rel * std::fabs(w) + tol.abs;
}

/// Compares the outputs; a failure names the case, the run and the first mismatches.
void expect_same_outputs(const Case& c, const std::vector<Bytes>& want,
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

std::vector<int> vector_widths() {
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
std::vector<int64_t> cuts(int64_t range) {
  auto at = [&](int64_t x) { return std::min(range, x); };
  return {0, at(1), at(range / 3 + 1), at(2 * range / 3 + 3), range};
}

/// Compiles all cases into one module per vector width and checks each against the interpreter.
void check(const std::vector<Case>& cases, Split split = Split::Whole) {
  std::vector<Kernel> kernels;
  for (const Case& c : cases)
    kernels.push_back(c.kernel);
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
      EXPECT_EQ(fn.launch.range, c.kernel.reduce_rank ? collapsed.num_rows() : numel)
          << c.kernel.name;
      std::vector<Bytes> got = fresh_buffers(c);
      const std::vector<void*> p = pointers(got);
      if (split == Split::Whole) {
        fn.function(p.data(), 0, fn.launch.range);
      } else {
        const std::vector<int64_t> at = cuts(fn.launch.range);
        for (size_t k = 0; k + 1 < at.size(); ++k)
          fn.function(p.data(), at[k], at[k + 1]);
      }
      expect_same_outputs(c, want[i], got, split == Split::Whole ? "whole range" : "in pieces",
                          bits);
    }
  }
}

// ---- Kernel shapes used by many tests ----------------------------------------------------------

constexpr int64_t kN = 531;  // 33 * 16 + 3: a tail at every vector width

Kernel unary_kernel(Op op, DType t, int64_t n = kN) {
  Kernel k =
      make_kernel(std::string(kernel::op_name(op)) + "_" + ir::dtype_name(t), {n}, 0, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1}, b.unary(op, b.load(0, {1}), t));
  return k;
}

Kernel binary_kernel(Op op, DType arg, DType out, int64_t n = kN) {
  Kernel k = make_kernel(std::string(kernel::op_name(op)) + "_" + ir::dtype_name(arg), {n}, 0,
                         {arg, arg}, {out});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(op, b.load(0, {1}), b.load(1, {1}), out));
  return k;
}

Kernel cast_kernel(DType from, DType to, int64_t n = kN) {
  Kernel k = make_kernel(std::string("cast_") + ir::dtype_name(from) + "_to_" + ir::dtype_name(to),
                         {n}, 0, {from}, {to});
  KernelBuilder b(k);
  b.store(1, {1}, b.cast(b.load(0, {1}), to));
  return k;
}

/// [rows, n] reducing the last dim of b0 into b1.
Kernel reduce_kernel(ReduceKind kind, DType t, int64_t rows, int64_t n) {
  Kernel k =
      make_kernel(std::string("reduce_") + kernel::reduce_kind_name(kind) + "_" +
                      ir::dtype_name(t) + "_" + std::to_string(rows) + "x" + std::to_string(n),
                  {rows, n}, 1, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(kind, b.load(0, {n, 1})));
  return k;
}

// ---- Elementwise -------------------------------------------------------------------------------

TEST(KernelCodegenTest, Float32ChainWithBroadcasting) {
  // out[i][j] = (a[i][j] + row[j]) * col[i] / s - a[i][j], over [13, 37]. No multiply feeds an
  // add, so nothing may fuse into an FMA and every op rounds as the interpreter's does: exact.
  Kernel k = make_kernel("chain", {13, 37}, 0, {F32, F32, F32, F32}, {F32});
  KernelBuilder b(k);
  const int a = b.load(0, {37, 1});
  const int sum = b.binary(Op::Add, a, b.load(1, {0, 1}), F32);
  const int prod = b.binary(Op::Mul, sum, b.load(2, {1, 0}), F32);
  const int q = b.binary(Op::Div, prod, b.load(3, {0, 0}), F32);
  b.store(4, {37, 1}, b.binary(Op::Sub, q, a, F32));
  check({make_case(k, {uniform(-3, 3)})});
}

TEST(KernelCodegenTest, MultiplyAddMayFuseIntoOneRounding) {
  // out = a * row + c. The codegen may contract it into an FMA (one rounding instead of the
  // interpreter's two): the results then differ by at most the product's rounding error, half an
  // ulp of |a * row| <= 16, so 2^-24 * 16, plus one ulp of the result.
  Kernel k = make_kernel("mul_add", {13, 37}, 0, {F32, F32, F32}, {F32});
  KernelBuilder b(k);
  const int prod = b.binary(Op::Mul, b.load(0, {37, 1}), b.load(1, {0, 1}), F32);
  b.store(3, {37, 1}, b.binary(Op::Add, prod, b.load(2, {37, 1}), F32));
  check({make_case(k, {uniform(-4, 4)}, [](int) { return Tolerance{1, 0, 16 * kU32}; })});
}

TEST(KernelCodegenTest, NonContiguousLoadsAndStores) {
  // A transposed load, a load of every other element with an offset, and a transposed store.
  Kernel k = make_kernel("gather_scatter", {13, 37}, 0, {F32, F32}, {F32, F32});
  KernelBuilder b(k);
  const int t = b.load(0, {1, 13});
  const int every_other = b.load(1, {74, 2}, 1);
  const int sum = b.binary(Op::Add, t, every_other, F32);
  b.store(2, {1, 13}, sum);
  b.store(3, {40, 1}, b.binary(Op::Mul, sum, t, F32), 3);  // a padded row-major layout
  check({make_case(k, {uniform(-2, 2)})});
}

TEST(KernelCodegenTest, SizesThatAreNotMultiplesOfTheVectorWidth) {
  std::vector<Case> cases;
  for (int64_t n : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 1000}) {
    Kernel k = make_kernel("tail_" + std::to_string(n), {3, n}, 0, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int x = b.load(0, {n, 1});
    b.store(2, {n, 1}, b.binary(Op::Mul, b.binary(Op::Add, x, b.load(1, {0, 1}), F32), x, F32));
    cases.push_back(make_case(k, {uniform(-5, 5)}));
  }
  check(cases);
}

TEST(KernelCodegenTest, ZeroSizeKernelsWriteNothing) {
  std::vector<Case> cases;
  for (std::vector<int64_t> sizes : {std::vector<int64_t>{0}, {4, 0}, {0, 4}}) {
    Kernel k = make_kernel("empty_" + std::to_string(sizes.size()) + "_" + std::to_string(sizes[0]),
                           sizes, 0, {F32}, {F32});
    KernelBuilder b(k);
    const std::vector<int64_t> strides =
        sizes.size() == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{sizes[1], 1};
    b.store(1, strides, b.unary(Op::Neg, b.load(0, strides), F32));
    cases.push_back(make_case(k, {uniform(-1, 1)}));
  }
  cases.push_back(make_case(reduce_kernel(ReduceKind::Sum, F32, 0, 8), {uniform(-1, 1)}));
  // Rows of zero elements: the sum of nothing is 0.
  cases.push_back(make_case(reduce_kernel(ReduceKind::Sum, F32, 3, 0), {uniform(-1, 1)}));
  check(cases);
}

TEST(KernelCodegenTest, StoreOfAnExpressionOfConstantsOnly) {
  // out0 = 2 + 3 and out1 = int(7.9): values that depend on no load.
  Kernel k = make_kernel("constants", {kN}, 0, {F32}, {F32, I32, F32});
  KernelBuilder b(k);
  b.store(1, {1}, b.binary(Op::Add, b.constant(2, F32), b.constant(3, F32), F32));
  b.store(2, {1}, b.cast(b.constant(7.9, F32), I32));
  b.store(3, {1}, b.binary(Op::Mul, b.load(0, {1}), b.constant(0.5, F32), F32));
  check({make_case(k, {uniform(-1, 1)})});
}

TEST(KernelCodegenTest, EveryFloatUnaryOp) {
  struct Expect {
    Op op;
    ToleranceFor f32;
  };
  const std::vector<Expect> ops = {
      {Op::Neg, exact},
      {Op::Abs, exact},
      {Op::Floor, exact},
      {Op::Trunc, exact},
      {Op::Sqrt, exact},
      {Op::Reciprocal, exact},
      {Op::Rsqrt, ulps(2)},
      {Op::Exp, ulps(kMaxUlpExp)},
      {Op::Log, ulps(kMaxUlpLog)},
      {Op::Tanh, ulps(kMaxUlpTanh)},
      {Op::Erf, ulps(kMaxUlpErf)},
      {Op::Sigmoid, ulps(kMaxUlpSigmoid)},
  };
  std::vector<Case> cases;
  for (const Expect& e : ops) {
    const bool transcendental =
        e.op >= Op::Exp && e.op <= Op::Sigmoid && e.op != Op::Sqrt && e.op != Op::Reciprocal;
    const Fill fill = uniform(e.op == Op::Log ? 0 : -6, 6, kFloatSpecials);
    cases.push_back(make_case(unary_kernel(e.op, F32), {fill}, e.f32));
    cases.push_back(make_case(unary_kernel(e.op, F64), {fill}, exact));
    for (DType t : {F16, BF16})
      cases.push_back(make_case(unary_kernel(e.op, t), {fill}, transcendental ? ulps(1) : exact));
  }
  check(cases);
}

TEST(KernelCodegenTest, EveryIntegerUnaryOp) {
  std::vector<Case> cases;
  for (Op op : {Op::Neg, Op::Abs, Op::Floor, Op::Trunc})
    for (DType t : {I8, U8, I32, I64})
      cases.push_back(make_case(unary_kernel(op, t), {random_bits()}));
  cases.push_back(make_case(unary_kernel(Op::Not, B8), {random_bits()}));
  check(cases);
}

TEST(KernelCodegenTest, EveryFloatBinaryOp) {
  std::vector<Case> cases;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min})
    for (DType t : {F32, F64, F16, BF16})
      cases.push_back(make_case(binary_kernel(op, t, t), {uniform(-8, 8, kFloatSpecials)}));
  check(cases);
}

TEST(KernelCodegenTest, EveryIntegerBinaryOpWraps) {
  std::vector<Case> cases;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min})
    for (DType t : {I8, U8, I32, I64})
      cases.push_back(make_case(binary_kernel(op, t, t), {random_bits()}));
  for (Op op : {Op::And, Op::Or})
    cases.push_back(make_case(binary_kernel(op, B8, B8), {random_bits()}));
  check(cases);
}

TEST(KernelCodegenTest, Int32ArithmeticWrapsAround) {
  Kernel k = make_kernel("wrap_i32", {8}, 0, {I32}, {I32, I32, I32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  b.store(1, {1}, b.binary(Op::Add, x, b.constant(2147483647, I32), I32));
  b.store(2, {1}, b.binary(Op::Mul, x, b.constant(65536, I32), I32));
  b.store(3, {1}, b.unary(Op::Neg, x, I32));
  Case c = make_case(k, {random_bits()});
  const std::vector<int32_t> values = {1, 2, -1, INT32_MIN, INT32_MAX, 65536, 40000, -40000};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(int32_t) * values.size());
  check({c});
}

TEST(KernelCodegenTest, PowAndIntegerDivisionAreUnsupported) {
  for (const Kernel& k : {binary_kernel(Op::Pow, F32, F32), binary_kernel(Op::Div, I32, I32)}) {
    try {
      compile_kernels({k}, {});
      ADD_FAILURE() << k.name << " compiled";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    }
  }
}

TEST(KernelCodegenTest, Comparisons) {
  std::vector<Case> cases;
  const std::vector<std::pair<DType, Fill>> inputs = {
      {F32, uniform(-3, 3, {kNaN, kInf, -kInf, 0.0, -0.0}, true)},
      {F64, uniform(-3, 3, {kNaN, kInf, 0.0, -0.0}, true)},
      {F16, uniform(-3, 3, {kNaN, -kInf}, true)},
      {BF16, uniform(-3, 3, {kNaN, kInf}, true)},
      {I32, ints(-3, 3)},
      {I64, ints(-3, 3)},
      {I8, ints(-3, 3)},
      {U8, ints(120, 135)},  // both sides of 128: unsigned, not signed, order
      {B8, random_bits()},
  };
  for (Op op : {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge})
    for (const auto& [t, fill] : inputs)
      cases.push_back(make_case(binary_kernel(op, t, B8), {fill}));
  check(cases);
}

TEST(KernelCodegenTest, Where) {
  std::vector<Case> cases;
  for (DType t : {F32, F16, I32, U8, B8, F64}) {
    // out[i][j] = a > b ? a : (broadcast row[j] or a constant, alternating by the row's sign).
    Kernel k =
        make_kernel(std::string("where_") + ir::dtype_name(t), {9, 37}, 0, {t, t, t, F32}, {t});
    KernelBuilder b(k);
    const int a = b.load(0, {37, 1});
    const int row = b.load(2, {0, 1});
    const int pick = b.binary(Op::Lt, b.load(3, {1, 0}), b.constant(0, F32), B8);
    const int other = b.where(pick, row, b.constant(1, t), t);
    b.store(4, {37, 1}, b.where(b.binary(Op::Gt, a, b.load(1, {37, 1}), B8), a, other, t));
    cases.push_back(make_case(k, {ints(-5, 5), ints(-5, 5), ints(-5, 5), uniform(-1, 1)}));
  }
  check(cases);
}

// ---- Casts -------------------------------------------------------------------------------------

// Values each source dtype can hold that convert to `to` without undefined behaviour (float ->
// int with the result in range), with fractions so that truncation shows.
Fill cast_inputs(DType from, DType to) {
  if (!ir::is_floating(from))
    return from == I64 && ir::is_floating(to) ? ints(-0x1p53, 0x1p53) : random_bits();
  switch (to) {
    case DType::Bool:
      return uniform(-2, 2, {0.0, -0.0, kNaN, kInf, -kInf, 1e-40});
    case DType::Int8:
      return uniform(-127, 126, {-0.5, 0.5, -127.9, 126.9});
    case DType::UInt8:
      return uniform(0, 254, {0.5, 0.0, 254.9});
    case DType::Int32:
      return uniform(-2e9, 2e9, {-2.5, 2.5, -0.9});
    case DType::Int64:
      return uniform(-1e18, 1e18, {-2.5, 2.5, -0.9});
    default:
      return uniform(-7e4, 7e4, kFloatSpecials);  // past float16's range
  }
}

TEST(KernelCodegenTest, CastsBetweenEveryPairOfDtypes) {
  const std::vector<DType> dtypes = {F32, F64, I32, I64, I8, U8, B8, F16, BF16};
  std::vector<Case> cases;
  for (DType from : dtypes)
    for (DType to : dtypes) {
      if (from == to) continue;
      Fill fill = cast_inputs(from, to);
      // float16/bfloat16 cannot hold the int32/int64 ranges: keep them finite and in range.
      if ((from == F16 || from == BF16) && (to == I32 || to == I64))
        fill = uniform(-6e4, 6e4, {-2.5, 2.5});
      cases.push_back(make_case(cast_kernel(from, to), {fill}));
    }
  check(cases);
}

TEST(KernelCodegenTest, FloatToIntCastTruncatesTowardZero) {
  Case c = make_case(cast_kernel(F32, I32, 6), {uniform(0, 0)});
  const std::vector<float> values = {2.7f, -2.7f, 0.5f, -0.5f, 3.0f, -1e9f};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(float) * values.size());
  check({c});
}

TEST(KernelCodegenTest, NegativeFloatToUInt8WrapsLikeTorch) {
  // c10's float -> uint8 conversion goes through int64, so -3.7 becomes 253, as the interpreter
  // says.
  check({make_case(cast_kernel(F32, U8), {uniform(-127, 126, {-1.0, -3.7})})});
}

TEST(KernelCodegenTest, Float64ToFloat16RoundsThroughFloat32AsTheInterpreterDoes) {
  // 1 + 2^-11 + 2^-40 rounds to float32 1 + 2^-11, a float16 tie that goes to even (1.0); rounded
  // straight from float64 it would be 1 + 2^-10.
  Case c = make_case(cast_kernel(F64, F16, 4), {uniform(0, 0)});
  const std::vector<double> values = {1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-11 + 0x1p-40), 0.1,
                                      65519.99};
  std::memcpy(c.inputs[0].data(), values.data(), sizeof(double) * values.size());
  check({c});
}

// ---- float16 and bfloat16 in memory ------------------------------------------------------------

// Every bit pattern of a 16-bit float, as one input of 65536 elements.
Case every_pattern(Kernel k) {
  Case c = make_case(std::move(k), {uniform(0, 0)});
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    std::memcpy(&c.inputs[0][2 * i], &bits, 2);
  }
  return c;
}

TEST(KernelCodegenTest, SixteenBitFloatRoundTripsAreBitExact) {
  std::vector<Case> cases;
  for (DType t : {F16, BF16}) {
    // out0 = x; out1 = float(x); out2 = (x -> float -> back)
    Kernel k =
        make_kernel(std::string("round_trip_") + ir::dtype_name(t), {65536}, 0, {t}, {t, F32, t});
    KernelBuilder b(k);
    const int x = b.load(0, {1});
    b.store(1, {1}, x);
    const int wide = b.cast(x, F32);
    b.store(2, {1}, wide);
    b.store(3, {1}, b.cast(wide, t));
    cases.push_back(every_pattern(k));
  }
  check(cases);
}

TEST(KernelCodegenTest, Float32To16BitFloatRoundsToNearestEven) {
  // Random float32 bit patterns around the 16-bit formats' ranges (subnormals, overflow, ties).
  const Fill near_half = [](DType, int64_t n, std::mt19937_64& rng) {
    Bytes b(n * 4);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t exponent = 96 + static_cast<uint32_t>(rng() % 56);  // 2^-31 .. 2^24
      uint32_t bits = (static_cast<uint32_t>(rng()) & 0x807fffffu) | (exponent << 23);
      if (i % 4 == 0) bits = (bits & 0xffffe000u) | 0x1000u;  // a float16 tie
      if (i % 4 == 1) bits = (bits & 0xffff0000u) | 0x8000u;  // a bfloat16 tie
      std::memcpy(&b[4 * i], &bits, 4);
    }
    return b;
  };
  std::vector<Case> cases;
  for (DType t : {F16, BF16}) {
    Kernel k = make_kernel(std::string("narrow_to_") + ir::dtype_name(t), {4099}, 0, {F32}, {t, t});
    KernelBuilder b(k);
    const int x = b.load(0, {1});
    b.store(1, {1}, x);             // the store converts
    b.store(2, {1}, b.cast(x, t));  // the cast converts, the store copies
    cases.push_back(make_case(k, {near_half}));
  }
  check(cases);
}

// ---- Reductions --------------------------------------------------------------------------------

ToleranceFor sum_tolerance(ReduceKind kind, int64_t n, double max_abs, double unit = kU32) {
  return [=](int bits) {
    if (kind == ReduceKind::Max || kind == ReduceKind::Min) return Tolerance{};
    const double bound = sum_error(bits, n, n * max_abs, unit);
    return kind == ReduceKind::Sum ? Tolerance{0, 0, bound}
                                   : Tolerance{0, unit, bound / std::max<int64_t>(n, 1)};
  };
}

const std::vector<ReduceKind> kKinds = {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max,
                                        ReduceKind::Min};
const std::vector<int64_t> kRowSizes = {1, 7, 1000, 4096};

TEST(KernelCodegenTest, FloatReductionsOverOneDim) {
  std::vector<Case> cases;
  for (ReduceKind kind : kKinds)
    for (int64_t n : kRowSizes) {
      cases.push_back(
          make_case(reduce_kernel(kind, F32, 5, n), {uniform(-1, 1)}, sum_tolerance(kind, n, 1)));
      cases.push_back(make_case(reduce_kernel(kind, F64, 3, n), {uniform(-1, 1)},
                                sum_tolerance(kind, n, 1, 0x1p-53)));
    }
  check(cases);
}

TEST(KernelCodegenTest, FloatReductionsOverTwoDims) {
  // [rows, a, b] with the reduced dims transposed in memory (nested loops, strided loads), and
  // the same contiguous (merged into one dim).
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {7, 1}, {1, 7}, {25, 40}, {64, 64}};
  std::vector<Case> cases;
  for (ReduceKind kind : kKinds)
    for (auto [a, c] : shapes)
      for (bool transposed : {true, false}) {
        Kernel k =
            make_kernel(std::string("reduce2_") + kernel::reduce_kind_name(kind) + "_" +
                            std::to_string(a) + "x" + std::to_string(c) + (transposed ? "_t" : ""),
                        {4, a, c}, 2, {F32}, {F32});
        KernelBuilder b(k);
        const std::vector<int64_t> in =
            transposed ? std::vector<int64_t>{a * c, 1, a} : std::vector<int64_t>{a * c, c, 1};
        b.store(1, {1, 0, 0}, b.reduce(kind, b.load(0, in)));
        cases.push_back(make_case(k, {uniform(-1, 1)}, sum_tolerance(kind, a * c, 1)));
      }
  check(cases);
}

TEST(KernelCodegenTest, SixteenBitFloatReductions) {
  std::vector<Case> cases;
  for (DType t : {F16, BF16})
    for (ReduceKind kind : kKinds)
      for (int64_t n : {7, 1000}) {
        ToleranceFor inner = sum_tolerance(kind, n, 1);
        // The result is rounded to the 16-bit format: one more unit there.
        cases.push_back(
            make_case(reduce_kernel(kind, t, 3, n), {uniform(-1, 1)}, [inner](int bits) {
              Tolerance tol = inner(bits);
              tol.ulp = 1;
              return tol;
            }));
      }
  check(cases);
}

TEST(KernelCodegenTest, SixteenBitFloatSumIsRoundedBeforeItIsUsed) {
  // In float16, sum([2048, 1]) = 2049 is a tie between 2048 and 2050 and rounds to even, 2048;
  // in bfloat16, sum([2048, 8]) = 2056 ties between 2048 and 2064 and rounds to 2048. The means
  // (1024.5 and 1028) tie the same way to 1024. Subtracting 2048 (1024) must give 0.
  std::vector<Case> cases;
  for (DType t : {F16, BF16})
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean}) {
      Kernel k = make_kernel(
          std::string("rounded_") + kernel::reduce_kind_name(kind) + "_" + ir::dtype_name(t),
          {1, 2}, 1, {t}, {t});
      KernelBuilder b(k);
      const int r = b.reduce(kind, b.load(0, {2, 1}));
      const double big = kind == ReduceKind::Sum ? 2048 : 1024;
      b.store(1, {1, 0}, b.binary(Op::Sub, r, b.constant(big, t), t));
      Case c = make_case(k, {uniform(0, 0)});
      put(t, &c.inputs[0][0], 2048);
      put(t, &c.inputs[0][2], t == F16 ? 1 : 8);
      cases.push_back(c);
    }
  check(cases);
}

TEST(KernelCodegenTest, IntegerAndBoolReductions) {
  std::vector<Case> cases;
  for (int64_t n : kRowSizes) {
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min})
      for (DType t : {I32, I64, U8, I8})
        cases.push_back(make_case(reduce_kernel(kind, t, 3, n), {random_bits()}));
    for (ReduceKind kind : {ReduceKind::Max, ReduceKind::Min})  // any, all
      cases.push_back(make_case(reduce_kernel(kind, B8, 4, n), {random_bits()}));
  }
  check(cases);
}

TEST(KernelCodegenTest, IntegerMeanTruncatesOrIsUnsupported) {
  // The interpreter divides the exact sum and truncates; a generator may decline integer means.
  std::vector<Case> cases;
  for (DType t : {I32, U8})
    cases.push_back(make_case(reduce_kernel(ReduceKind::Mean, t, 3, 7), {ints(0, 100)}));
  try {
    check(cases);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
  }
}

TEST(KernelCodegenTest, MaxAndMinReductionsPropagateNaN) {
  // Rows of 37: at 4 lanes, [0, 32) is the unrolled loop, [32, 36) one vector, 36 the scalar
  // tail. Row 0: NaN first; row 1: NaN at 17; row 2: the last element; row 3: no NaN; row 4: all
  // -inf (max) / +inf (min); row 5: infinities and a NaN; row 6: NaN at 34.
  std::vector<Case> cases;
  for (ReduceKind kind : {ReduceKind::Max, ReduceKind::Min})
    for (DType t : {F32, F64, F16}) {
      Case c = make_case(reduce_kernel(kind, t, 7, 37), {uniform(-1, 1)});
      auto at = [&](int64_t row, int64_t i, double v) {
        put(t, &c.inputs[0][(row * 37 + i) * ir::dtype_size(t)], v);
      };
      at(0, 0, kNaN);
      at(1, 17, kNaN);
      at(2, 36, kNaN);
      const double inf = kind == ReduceKind::Max ? -kInf : kInf;
      for (int64_t i = 0; i < 37; ++i) {
        at(4, i, inf);
        at(5, i, i % 2 ? -inf : inf);
      }
      at(5, 20, kNaN);
      at(6, 34, kNaN);
      cases.push_back(c);
    }
  check(cases);
}

// ---- Kernels built from exprs: softmax and layer norm -----------------------------------------

/// out = exp(x - max(x)) / sum(exp(x - max(x))) over rows of n. Every step is relative: exp's
/// error, the positive sum's bound, and the division: rel <= (n/lanes + log2(lanes) + 8) u.
Case softmax_case(int64_t rows, int64_t n) {
  Kernel k = make_kernel("softmax_" + std::to_string(n), {rows, n}, 1, {F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {n, 1});
  const int m = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, m, F32), F32);
  const int s = b.reduce(ReduceKind::Sum, e);
  b.store(1, {n, 1}, b.binary(Op::Div, e, s, F32));
  return make_case(k, {uniform(-4, 4)}, [n](int bits) {
    return Tolerance{0, sum_error(bits, n, 1) + 6 * kU32, 0};
  });
}

/// mean, d = x - mean, var = mean(d * d), rstd = rsqrt(var + eps), y = d * rstd * gamma + beta;
/// stores y (element level, transposed when asked) and mean and rstd (row level). x is U(1, 5):
/// the mean's absolute error (sum bound / n, times max |x| = 5) passes into d and, divided by
/// std ~ 1.15, into y; the bound below is ten times that, plus a few ulp.
Case layer_norm_case(int64_t rows, int64_t n, bool transposed_out = false) {
  Kernel k = make_kernel("layer_norm_" + std::to_string(n) + (transposed_out ? "_t" : ""),
                         {rows, n}, 1, {F32, F32, F32}, {F32, F32, F32});
  KernelBuilder b(k);
  const int x = b.load(0, {n, 1});
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int d = b.binary(Op::Sub, x, mean, F32);
  const int var = b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, F32));
  const int rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.constant(1e-5, F32), F32), F32);
  const int scaled = b.binary(Op::Mul, b.binary(Op::Mul, d, rstd, F32), b.load(1, {0, 1}), F32);
  b.store(3, transposed_out ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{n, 1},
          b.binary(Op::Add, scaled, b.load(2, {0, 1}), F32));
  b.store(4, {1, 0}, mean);
  b.store(5, {1, 0}, rstd);
  return make_case(k, {uniform(1, 5), uniform(0.5, 1.5), uniform(-1, 1)}, [n](int bits) {
    return Tolerance{4, 16 * kU32, 10 * sum_error(bits, n, n * 5.0) / n / 1.15};
  });
}

TEST(KernelCodegenTest, Softmax) {
  std::vector<Case> cases;
  for (int64_t n : kRowSizes)
    cases.push_back(softmax_case(5, n));
  check(cases);
}

TEST(KernelCodegenTest, LayerNormWithRowAndElementStores) {
  std::vector<Case> cases;
  for (int64_t n : kRowSizes) {
    cases.push_back(layer_norm_case(4, n));
    cases.push_back(layer_norm_case(3, n, true));
  }
  check(cases);
}

TEST(KernelCodegenTest, RowLevelLoadsAndStoresBesideElementStores) {
  // Per row: s = sum(x) + bias[row] (row level); per element: (x - max(x)) * bias[row], stored
  // transposed. An integer variant checks it exactly.
  std::vector<Case> cases;
  for (DType t : {F32, I32}) {
    const int64_t rows = 6, n = 45;
    Kernel k = make_kernel(std::string("row_and_element_") + ir::dtype_name(t), {rows, n}, 1,
                           {t, t}, {t, t});
    KernelBuilder b(k);
    const int x = b.load(0, {n, 1});
    const int bias = b.load(1, {1, 0});
    b.store(2, {1, 0}, b.binary(Op::Add, b.reduce(ReduceKind::Sum, x), bias, t));
    const int centered = b.binary(Op::Sub, x, b.reduce(ReduceKind::Max, x), t);
    b.store(3, {1, rows}, b.binary(Op::Mul, centered, bias, t));
    cases.push_back(make_case(k, {t == I32 ? ints(-1000, 1000) : uniform(-1, 1)}, [n](int bits) {
      return Tolerance{0, 0, sum_error(bits, n, n + 1.0)};
    }));
  }
  check(cases);
}

// ---- The same kernels run in uneven pieces of their launch range -------------------------------

std::vector<Case> piecewise_cases() {
  std::vector<Case> cases;
  {
    Kernel k = make_kernel("pieces_broadcast_gather", {5, 37}, 0, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int sum = b.binary(Op::Add, b.load(0, {1, 5}), b.load(1, {0, 1}), F32);
    b.store(2, {37, 1}, b.unary(Op::Exp, sum, F32));
    cases.push_back(make_case(k, {uniform(-3, 3)}, ulps(kMaxUlpExp)));
  }
  {
    Kernel k = make_kernel("pieces_scatter", {3, 4, 11}, 0, {F16}, {BF16});
    KernelBuilder b(k);
    b.store(1, {1, 3, 12}, b.cast(b.load(0, {44, 11, 1}), BF16));
    cases.push_back(make_case(k, {uniform(-100, 100)}));
  }
  cases.push_back(make_case(unary_kernel(Op::Neg, I64, 1000), {random_bits()}));
  cases.push_back(make_case(reduce_kernel(ReduceKind::Sum, F32, 9, 1000), {uniform(-1, 1)},
                            sum_tolerance(ReduceKind::Sum, 1000, 1)));
  cases.push_back(make_case(reduce_kernel(ReduceKind::Max, I32, 11, 7), {random_bits()}));
  {
    Kernel k = make_kernel("pieces_reduce2", {7, 25, 40}, 2, {F32}, {F32});
    KernelBuilder b(k);
    b.store(1, {1, 0, 0}, b.reduce(ReduceKind::Min, b.load(0, {1000, 1, 25})));
    cases.push_back(make_case(k, {uniform(-1, 1)}));
  }
  cases.push_back(softmax_case(7, 33));
  cases.push_back(layer_norm_case(6, 100, true));
  return cases;
}

TEST(KernelCodegenTest, UnevenPiecesOfTheLaunchRangeComputeTheSame) {
  check(piecewise_cases(), Split::Pieces);
}

}  // namespace
}  // namespace kiln::codegen
