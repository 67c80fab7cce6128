#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/scalar_convert.h"
#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::make_kernel;

// The message of the std::invalid_argument that validate(kernel) throws, or a marker.
std::string validation_error(const Kernel& kernel) {
  try {
    validate(kernel);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<valid>";
}

// An expr built by hand, bypassing KernelBuilder, to make kernels the builder would not.
Expr raw_expr(Op op, DType dtype, std::vector<int> args) {
  Expr e{};
  e.op = op;
  e.dtype = dtype;
  e.args = std::move(args);
  return e;
}

// A [n] kernel that loads b0, converts it to `out` and stores it into b1.
Kernel convert_kernel(int64_t n, DType in, DType out) {
  Kernel k = make_kernel("k", {n}, 0, {in}, {out});
  KernelBuilder b(k);
  b.store(1, {1}, b.cast(b.load(0, {1}), out));
  return k;
}

// ---- Elementwise -------------------------------------------------------------------------------

// Float -> integer as eager's CPU kernels give it on x86 (the values below are eager's, torch
// 2.11): out of range, NaN and infinities give the intermediate integer's most negative value.
TEST(InterpreterTest, FloatToIntegerIsEagersConversion) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {nan,         inf,         -inf,         3e9,         -3e9,
                           1e20,        300.7,       -300.7,       -1.5,        70000,
                           4294967596., 2147483948., -2147483948., 2147483520., -2147483648.};
  constexpr int64_t m64 = INT64_MIN, m32 = INT32_MIN;
  const std::vector<std::pair<DType, std::vector<int64_t>>> from_float64 = {
      {DType::Int64,
       {m64, m64, m64, 3000000000, -3000000000, m64, 300, -300, -1, 70000, 4294967596, 2147483948,
        -2147483948, 2147483520, -2147483648}},
      {DType::Int32,
       {m32, m32, m32, m32, m32, m32, 300, -300, -1, 70000, m32, m32, m32, 2147483520, m32}},
      {DType::Int8, {0, 0, 0, 0, 0, 0, 44, -44, -1, 112, 0, 0, 0, -128, 0}},
      {DType::UInt8, {0, 0, 0, 0, 0, 0, 44, 212, 255, 112, 44, 44, 212, 128, 0}},
  };
  for (const auto& [to, want] : from_float64) {
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(integer_from_float(x[i], DType::Float64, to), want[i])
          << x[i] << " to " << ir::dtype_name(to);
  }
  // From float32, uint8 goes through int32 (4294967596 is 4294967808 as a float32).
  EXPECT_EQ(integer_from_float(4294967808., DType::Float32, DType::UInt8), 0);
  EXPECT_EQ(integer_from_float(-300.7, DType::Float32, DType::UInt8), 212);
  // The interpreter's casts follow the same rule.
  Kernel k = convert_kernel(static_cast<int64_t>(x.size()), DType::Float64, DType::Int32);
  std::vector<int32_t> out(x.size());
  interpret(k, {x.data(), out.data()});
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(out[i], from_float64[1].second[i]) << x[i];
}

TEST(InterpreterTest, AddBroadcastsARowThroughStrideZero) {
  // out[i][j] = a[i][j] + row[j] over [2,3].
  Kernel k = make_kernel("k", {2, 3}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(2, {3, 1}, b.binary(Op::Add, b.load(0, {3, 1}), b.load(1, {0, 1}), DType::Float32));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, row = {10, 20, 30}, out(6, -1);
  interpret(k, {a.data(), row.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(InterpreterTest, AddBroadcastsAColumnThroughStrideZero) {
  Kernel k = make_kernel("k", {2, 3}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(2, {3, 1}, b.binary(Op::Add, b.load(0, {3, 1}), b.load(1, {1, 0}), DType::Float32));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, col = {100, 200}, out(6, -1);
  interpret(k, {a.data(), col.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{101, 102, 103, 204, 205, 206}));
}

TEST(InterpreterTest, StoreThroughTransposedStrides) {
  // out is [3,2] row-major, written as the transpose of the [2,3] input.
  Kernel k = make_kernel("k", {2, 3}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 2}, b.load(0, {3, 1}));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, out(6, -1);
  interpret(k, {a.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(InterpreterTest, OffsetsShiftLoadsAndStores) {
  Kernel k = make_kernel("k", {3}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1}, b.load(0, {1}, 2), 1);
  std::vector<float> a = {0, 1, 2, 3, 4}, out(4, -1);
  interpret(k, {a.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{-1, 2, 3, 4}));
}

TEST(InterpreterTest, Float32OpsRoundAfterEveryOp) {
  // (1 + 2^-30) - 1 is 0 in float32 (the sum rounds to 1), not 2^-30 as in double.
  Kernel k = make_kernel("k", {1}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int one = b.load(0, {0});
  const int sum = b.binary(Op::Add, one, b.load(1, {0}), DType::Float32);
  b.store(2, {0}, b.binary(Op::Sub, sum, one, DType::Float32));
  float a = 1.0f, tiny = std::ldexp(1.0f, -30), out = -1;
  interpret(k, {&a, &tiny, &out});
  EXPECT_EQ(out, 0.0f);
}

TEST(InterpreterTest, UnaryFloatOps) {
  Kernel k = make_kernel("k", {1}, 0, {DType::Float32},
                         {DType::Float32, DType::Float32, DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {0});
  b.store(1, {0}, b.unary(Op::Sigmoid, x, DType::Float32));
  b.store(2, {0}, b.unary(Op::Rsqrt, x, DType::Float32));
  b.store(3, {0}, b.unary(Op::Floor, b.unary(Op::Neg, x, DType::Float32), DType::Float32));
  b.store(4, {0}, b.unary(Op::Trunc, b.unary(Op::Neg, x, DType::Float32), DType::Float32));
  float in = 2.25f, sig = 0, rsqrt = 0, floor = 0, trunc = 0;
  interpret(k, {&in, &sig, &rsqrt, &floor, &trunc});
  EXPECT_FLOAT_EQ(sig, static_cast<float>(1 / (1 + std::exp(-2.25))));
  EXPECT_FLOAT_EQ(rsqrt, 1 / 1.5f);
  EXPECT_EQ(floor, -3.0f);
  EXPECT_EQ(trunc, -2.0f);
}

TEST(InterpreterTest, WhereSelectsByCondition) {
  Kernel k =
      make_kernel("k", {4}, 0, {DType::Bool, DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(3, {1}, b.where(b.load(0, {1}), b.load(1, {1}), b.load(2, {0}), DType::Float32));
  std::vector<uint8_t> cond = {1, 0, 0, 1};
  std::vector<float> then = {1, 2, 3, 4}, other = {-9}, out(4, 0);
  interpret(k, {cond.data(), then.data(), other.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{1, -9, -9, 4}));
}

// ---- Casts -------------------------------------------------------------------------------------

TEST(InterpreterTest, FloatToIntCastTruncatesTowardZero) {
  Kernel k = convert_kernel(6, DType::Float32, DType::Int32);
  std::vector<float> in = {2.7f, -2.7f, 0.5f, -0.5f, 3.0f, -1e9f};
  std::vector<int32_t> out(6, 99);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int32_t>{2, -2, 0, 0, 3, -1000000000}));
}

TEST(InterpreterTest, IntToBoolCastIsNonZero) {
  // 256 and -256 are not zero, though their low byte is.
  Kernel k = convert_kernel(5, DType::Int32, DType::Bool);
  std::vector<int32_t> in = {0, 1, -3, 256, -256};
  std::vector<uint8_t> out(5, 7);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
}

TEST(InterpreterTest, FloatToBoolCastIsNonZeroAndNaNIsTrue) {
  Kernel k = convert_kernel(4, DType::Float32, DType::Bool);
  std::vector<float> in = {0.0f, -0.0f, 0.1f, kNaN};
  std::vector<uint8_t> out(4, 7);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 0, 1, 1}));
}

TEST(InterpreterTest, IntNarrowingCastWraps) {
  Kernel k = convert_kernel(3, DType::Int64, DType::Int8);
  std::vector<int64_t> in = {127, 128, -129};
  std::vector<int8_t> out(3, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int8_t>{127, -128, 127}));
}

TEST(InterpreterTest, BoolToFloatCastIsZeroOrOne) {
  Kernel k = convert_kernel(2, DType::Bool, DType::Float32);
  std::vector<uint8_t> in = {0, 1};
  std::vector<float> out(2, -1);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{0, 1}));
}

TEST(InterpreterTest, StoreConvertsAValueOfAnotherDtype) {
  // An f32 value stored into an i32 buffer is converted like a cast.
  Kernel k = make_kernel("k", {2}, 0, {DType::Float32}, {DType::Int32});
  KernelBuilder b(k);
  b.store(1, {1}, b.load(0, {1}));
  std::vector<float> in = {7.9f, -7.9f};
  std::vector<int32_t> out(2, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int32_t>{7, -7}));
}

// ---- Integer arithmetic ------------------------------------------------------------------------

TEST(InterpreterTest, Int32AdditionWrapsAround) {
  Kernel k = make_kernel("k", {2}, 0, {DType::Int32, DType::Int32}, {DType::Int32});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(Op::Add, b.load(0, {1}), b.load(1, {1}), DType::Int32));
  std::vector<int32_t> x = {std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()};
  std::vector<int32_t> y = {1, -1}, out(2, 0);
  interpret(k, {x.data(), y.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::max()}));
}

TEST(InterpreterTest, Int32MultiplicationWrapsAround) {
  // 65536 * 65536 = 2^32 wraps to 0; 65537 * 65537 = 2^32 + 2^17 + 1 wraps to 131073.
  Kernel k = make_kernel("k", {2}, 0, {DType::Int32}, {DType::Int32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  b.store(1, {1}, b.binary(Op::Mul, x, x, DType::Int32));
  std::vector<int32_t> in = {65536, 65537}, out(2, -1);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int32_t>{0, 131073}));
}

TEST(InterpreterTest, IntegerDivisionTruncates) {
  Kernel k = make_kernel("k", {2}, 0, {DType::Int32, DType::Int32}, {DType::Int32});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(Op::Div, b.load(0, {1}), b.load(1, {1}), DType::Int32));
  std::vector<int32_t> x = {7, -7}, y = {2, 2}, out(2, 0);
  interpret(k, {x.data(), y.data(), out.data()});
  EXPECT_EQ(out, (std::vector<int32_t>{3, -3}));
}

// ---- NaN propagation ---------------------------------------------------------------------------

TEST(InterpreterTest, MaxPropagatesNaNFromEitherSide) {
  Kernel k = make_kernel("k", {3}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(Op::Max, b.load(0, {1}), b.load(1, {1}), DType::Float32));
  std::vector<float> x = {kNaN, 1.0f, 1.0f}, y = {1.0f, kNaN, 2.0f}, out(3, 0);
  interpret(k, {x.data(), y.data(), out.data()});
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 2.0f);
}

TEST(InterpreterTest, MinPropagatesNaNFromEitherSide) {
  Kernel k = make_kernel("k", {2}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(2, {1}, b.binary(Op::Min, b.load(0, {1}), b.load(1, {1}), DType::Float32));
  std::vector<float> x = {kNaN, 1.0f}, y = {1.0f, kNaN}, out(2, 0);
  interpret(k, {x.data(), y.data(), out.data()});
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

TEST(InterpreterTest, ReduceMaxPropagatesNaN) {
  // NaN in the middle of the first row, not at its end, so a plain max(acc, x) would lose it.
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(ReduceKind::Max, b.load(0, {3, 1})));
  std::vector<float> in = {1, kNaN, 2, 4, 6, 5}, out(2, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 6.0f);
}

// ---- Reductions --------------------------------------------------------------------------------

TEST(InterpreterTest, RowSum) {
  Kernel k = make_kernel("k", {3, 4}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {4, 1})));
  std::vector<float> in = {1, 2, 3, 4, 10, 20, 30, 40, -1, -1, 1, 1}, out(3, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{10, 100, 0}));
}

TEST(InterpreterTest, RowMeanAndMin) {
  Kernel k = make_kernel("k", {2, 4}, 1, {DType::Float32}, {DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {4, 1});
  b.store(1, {1, 0}, b.reduce(ReduceKind::Mean, x));
  b.store(2, {1, 0}, b.reduce(ReduceKind::Min, x));
  std::vector<float> in = {1, 2, 3, 6, -5, 0, 5, 8}, mean(2, 0), min(2, 0);
  interpret(k, {in.data(), mean.data(), min.data()});
  EXPECT_EQ(mean, (std::vector<float>{3, 2}));
  EXPECT_EQ(min, (std::vector<float>{1, -5}));
}

TEST(InterpreterTest, ReduceOverTwoTrailingDims) {
  Kernel k = make_kernel("k", {2, 2, 3}, 2, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0, 0}, b.reduce(ReduceKind::Sum, b.load(0, {6, 3, 1})));
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60}, out(2, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{21, 210}));
}

TEST(InterpreterTest, ReduceOverAColumnThroughPermutedStrides) {
  // The [3,2] input is read as its transpose: the kernel's rows are the input's columns.
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {1, 2})));
  std::vector<float> in = {1, 10, 2, 20, 3, 30}, out(2, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{6, 60}));
}

TEST(InterpreterTest, Int32SumWrapsAround) {
  Kernel k = make_kernel("k", {1, 2}, 1, {DType::Int32}, {DType::Int32});
  KernelBuilder b(k);
  b.store(1, {0, 0}, b.reduce(ReduceKind::Sum, b.load(0, {2, 1})));
  std::vector<int32_t> in = {std::numeric_limits<int32_t>::max(), 2}, out(1, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out[0], std::numeric_limits<int32_t>::min() + 1);
}

TEST(InterpreterTest, SoftmaxFromExprsMatchesAHandComputation) {
  Kernel k = make_kernel("k", {2, 4}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {4, 1});
  const int max = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, max, DType::Float32), DType::Float32);
  const int sum = b.reduce(ReduceKind::Sum, e);
  b.store(1, {4, 1}, b.binary(Op::Div, e, sum, DType::Float32));
  std::vector<float> in = {1, 2, 3, 4, -1, 0, 100, 0.5f}, out(8, 0);
  interpret(k, {in.data(), out.data()});
  for (int r = 0; r < 2; ++r) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 4; ++j)
      m = std::max(m, static_cast<double>(in[r * 4 + j]));
    for (int j = 0; j < 4; ++j)
      s += std::exp(in[r * 4 + j] - m);
    for (int j = 0; j < 4; ++j)
      EXPECT_NEAR(out[r * 4 + j], std::exp(in[r * 4 + j] - m) / s, 1e-6) << r << "," << j;
  }
  EXPECT_FLOAT_EQ(out[0] + out[1] + out[2] + out[3], 1.0f);
}

TEST(InterpreterTest, RowLevelAndElementLevelStoresInOneKernel) {
  // The row max (row-level) and x - max (element-level) from one kernel.
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {3, 1});
  const int max = b.reduce(ReduceKind::Max, x);
  b.store(1, {1, 0}, max);
  b.store(2, {3, 1}, b.binary(Op::Sub, x, max, DType::Float32));
  std::vector<float> in = {1, 5, 2, -3, -1, -2}, maxes(2, 0), centered(6, 0);
  interpret(k, {in.data(), maxes.data(), centered.data()});
  EXPECT_EQ(maxes, (std::vector<float>{5, -1}));
  EXPECT_EQ(centered, (std::vector<float>{-4, 0, -3, -2, 0, -1}));
}

TEST(InterpreterTest, RowLevelLoadBroadcastsAcrossTheRow) {
  // out[i][j] = x[i][j] * scale[i], with scale loaded at stride 0 on the reduced dim.
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {3, 1});
  const int scale = b.load(1, {1, 0});
  const int sum = b.reduce(ReduceKind::Sum, x);
  b.store(2, {3, 1},
          b.binary(Op::Div, b.binary(Op::Mul, x, scale, DType::Float32), sum, DType::Float32));
  std::vector<float> in = {1, 1, 2, 2, 4, 2}, scales = {8, 16}, out(6, 0);
  interpret(k, {in.data(), scales.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{2, 2, 4, 4, 8, 4}));
}

// ---- float16 and bfloat16 ----------------------------------------------------------------------

TEST(ScalarConvertTest, HalfRoundsTiesToEven) {
  EXPECT_EQ(half_from_float(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, down to even
  EXPECT_EQ(half_from_float(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, up to even
  EXPECT_EQ(half_from_float(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(half_from_float(-(1.0f + 3 * std::ldexp(1.0f, -11))), 0xbc02);
}

TEST(ScalarConvertTest, HalfExactValues) {
  EXPECT_EQ(half_from_float(1.0f), 0x3c00);
  EXPECT_EQ(half_from_float(-2.0f), 0xc000);
  EXPECT_EQ(half_from_float(0.0f), 0x0000);
  EXPECT_EQ(half_from_float(-0.0f), 0x8000);
  EXPECT_EQ(half_from_float(65504.0f), 0x7bff);
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
}

TEST(ScalarConvertTest, HalfOverflowsToInfinityFrom65520) {
  EXPECT_EQ(half_from_float(65519.0f), 0x7bff);
  EXPECT_EQ(half_from_float(65520.0f), 0x7c00);
  EXPECT_EQ(half_from_float(1e10f), 0x7c00);
  EXPECT_EQ(half_from_float(-1e10f), 0xfc00);
  EXPECT_EQ(half_from_float(kInf), 0x7c00);
  EXPECT_EQ(half_from_float(-kInf), 0xfc00);
}

TEST(ScalarConvertTest, HalfNaNStaysNaN) {
  const uint16_t bits = half_from_float(kNaN);
  EXPECT_EQ(bits & 0x7c00, 0x7c00);
  EXPECT_NE(bits & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(float_from_half(0x7c01)));
  EXPECT_TRUE(std::isnan(float_from_half(0xfe00)));
}

TEST(ScalarConvertTest, HalfSubnormals) {
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -25)), 0x0000);      // tie, down to even (zero)
  EXPECT_EQ(half_from_float(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie, up to even
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -25) + std::ldexp(1.0f, -40)), 0x0001);
  EXPECT_EQ(half_from_float(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(half_from_float(1023 * std::ldexp(1.0f, -24)), 0x03ff);  // largest subnormal
  // Halfway between the largest subnormal and the smallest normal rounds up to the normal.
  EXPECT_EQ(half_from_float(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(float_from_half(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_from_half(0x83ff), -1023 * std::ldexp(1.0f, -24));
}

TEST(ScalarConvertTest, EveryHalfSurvivesARoundTripThroughFloat) {
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = float_from_half(h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) {
      mismatches += std::isnan(f) ? 0 : 1;
    } else {
      mismatches += half_from_float(f) == h ? 0 : 1;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(ScalarConvertTest, BFloat16RoundsTiesToEven) {
  EXPECT_EQ(bfloat16_from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, down
  EXPECT_EQ(bfloat16_from_float(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, up
  EXPECT_EQ(bfloat16_from_float(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(bfloat16_from_float(-1.0f), 0xbf80);
}

TEST(ScalarConvertTest, BFloat16InfinityAndOverflow) {
  EXPECT_EQ(bfloat16_from_float(kInf), 0x7f80);
  EXPECT_EQ(bfloat16_from_float(-kInf), 0xff80);
  EXPECT_EQ(bfloat16_from_float(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_from_bfloat16(0x7f80), kInf);
}

TEST(ScalarConvertTest, BFloat16NaNWithLowPayloadStaysNaN) {
  // Truncating 0x7f800001 would give 0x7f80, infinity.
  const float nan_low = std::bit_cast<float>(uint32_t{0x7f800001});
  ASSERT_TRUE(std::isnan(nan_low));
  EXPECT_TRUE(std::isnan(float_from_bfloat16(bfloat16_from_float(nan_low))));
  EXPECT_TRUE(std::isnan(float_from_bfloat16(bfloat16_from_float(kNaN))));
}

TEST(ScalarConvertTest, BFloat16Subnormals) {
  // 2^-130 = 2^19 * 2^-149: a float32 subnormal (bits 0x00080000), exact in bfloat16.
  const float tiny = std::ldexp(1.0f, -130);
  EXPECT_EQ(bfloat16_from_float(tiny), 0x0008);
  EXPECT_EQ(float_from_bfloat16(0x0008), tiny);
  EXPECT_EQ(float_from_bfloat16(0x8001), -std::ldexp(1.0f, -133));
}

TEST(InterpreterTest, HalfLoadAndStoreRoundTripEveryValue) {
  Kernel k = convert_kernel(65536, DType::Float16, DType::Float16);
  std::vector<uint16_t> in(65536), out(65536, 0);
  for (uint32_t i = 0; i < 65536; ++i)
    in[i] = static_cast<uint16_t>(i);
  interpret(k, {in.data(), out.data()});
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x03ff) != 0;
    mismatches += nan ? !std::isnan(float_from_half(out[i])) : out[i] != in[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(InterpreterTest, BFloat16LoadAndStoreRoundTripEveryValue) {
  Kernel k = convert_kernel(65536, DType::BFloat16, DType::BFloat16);
  std::vector<uint16_t> in(65536), out(65536, 0);
  for (uint32_t i = 0; i < 65536; ++i)
    in[i] = static_cast<uint16_t>(i);
  interpret(k, {in.data(), out.data()});
  int mismatches = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const bool nan = (i & 0x7f80) == 0x7f80 && (i & 0x007f) != 0;
    mismatches += nan ? !std::isnan(float_from_bfloat16(out[i])) : out[i] != in[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(InterpreterTest, Float32StoredAsHalfRoundsToNearestEven) {
  Kernel k = convert_kernel(6, DType::Float32, DType::Float16);
  std::vector<float> in = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 65520.0f,
                           std::ldexp(1.0f, -25),        3 * std::ldexp(1.0f, -25),        -kInf};
  std::vector<uint16_t> out(6, 0x1234);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3c00, 0x3c02, 0x7c00, 0x0000, 0x0002, 0xfc00}));
}

TEST(InterpreterTest, Float32StoredAsBFloat16RoundsToNearestEven) {
  Kernel k = convert_kernel(3, DType::Float32, DType::BFloat16);
  std::vector<float> in = {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), kNaN};
  std::vector<uint16_t> out(3, 0);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f82);
  EXPECT_TRUE(std::isnan(float_from_bfloat16(out[2])));
}

TEST(InterpreterTest, HalfArithmeticRoundsEachResultToHalf) {
  // An f16 expr rounds its result to f16: 1 + 2^-11 is a tie that rounds to 1, so (x + y) - x
  // is 0 in f16.
  Kernel k = make_kernel("k", {1}, 0, {DType::Float16, DType::Float16}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {0});
  const int sum = b.binary(Op::Add, x, b.load(1, {0}), DType::Float16);
  b.store(2, {0}, b.binary(Op::Sub, sum, x, DType::Float16));
  uint16_t one = 0x3c00, tiny = half_from_float(std::ldexp(1.0f, -11));
  float out = -1;
  interpret(k, {&one, &tiny, &out});
  EXPECT_EQ(out, 0.0f);
}

// ---- validate() --------------------------------------------------------------------------------

TEST(ValidateTest, AcceptsAWellFormedKernel) {
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {3, 1})));
  EXPECT_EQ(validation_error(k), "<valid>");
}

TEST(ValidateTest, RejectsAStoreIntoAnInputBuffer) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(0, {1}, b.load(0, {1}));
  EXPECT_EQ(validation_error(k), "kernel k: store into an input buffer");
}

TEST(ValidateTest, RejectsALoadFromAnOutputBuffer) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1}, b.load(1, {1}));
  EXPECT_EQ(validation_error(k), "kernel k: load from an output buffer");
}

TEST(ValidateTest, RejectsAnExprReadingALaterExpr) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  k.exprs.push_back(raw_expr(Op::Add, DType::Float32, {x, 2}));  // reads itself + 1
  k.exprs.push_back(raw_expr(Op::Neg, DType::Float32, {x}));
  b.store(1, {1}, 1);
  EXPECT_EQ(validation_error(k), "kernel k: an expr reads a later or unknown expr");
}

TEST(ValidateTest, RejectsAnExprReadingItself) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.load(0, {1});
  k.exprs.push_back(raw_expr(Op::Neg, DType::Float32, {1}));
  b.store(1, {1}, 1);
  EXPECT_EQ(validation_error(k), "kernel k: an expr reads a later or unknown expr");
}

TEST(ValidateTest, RejectsAWrongArity) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  k.exprs.push_back(raw_expr(Op::Add, DType::Float32, {x}));
  b.store(1, {1}, 1);
  EXPECT_EQ(validation_error(k), "kernel k: add has the wrong number of arguments");
}

TEST(ValidateTest, RejectsAnIndexMapOfTheWrongRank) {
  Kernel k = make_kernel("k", {4, 2}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {2, 1}, b.load(0, {1}));
  EXPECT_EQ(validation_error(k), "kernel k: index map of wrong rank");
}

TEST(ValidateTest, RejectsAMapNamingNoBuffer) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(2, {1}, b.load(0, {1}));
  EXPECT_EQ(validation_error(k), "kernel k: index map names no buffer");
}

TEST(ValidateTest, RejectsInputsAfterOutputs) {
  Kernel k = make_kernel("k", {4}, 0, {}, {DType::Float32});
  k.buffers.push_back({"b1", DType::Float32, false});
  KernelBuilder b(k);
  b.store(0, {1}, b.load(1, {1}));
  EXPECT_EQ(validation_error(k), "kernel k: inputs must come before outputs");
}

TEST(ValidateTest, RejectsAReduceWithoutReducedDims) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1}, b.reduce(ReduceKind::Sum, b.load(0, {1})));
  EXPECT_EQ(validation_error(k), "kernel k: reduce in a kernel without reduced dimensions");
}

TEST(ValidateTest, RejectsAReduceOfARowLevelValue) {
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int row_value = b.load(0, {1, 0});
  // Built by hand: KernelBuilder::reduce folds such a reduction into arithmetic.
  k.exprs.push_back(raw_expr(Op::Reduce, DType::Float32, {row_value}));
  b.store(1, {1, 0}, static_cast<int>(k.exprs.size()) - 1);
  EXPECT_EQ(validation_error(k), "kernel k: reduce of a row-level value");
}

TEST(KernelBuilderTest, ReduceOfARowLevelValueNeedsNoPass) {
  // Each row of x[2] broadcast over 3 elements: sum = 3x, mean = max = x.
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32, DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {1, 0});
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, x));
  b.store(2, {1, 0}, b.reduce(ReduceKind::Max, x));
  for (const auto& e : k.exprs)
    EXPECT_NE(e.op, Op::Reduce);
  std::vector<float> in = {2, -5}, sum(2), max(2);
  interpret(k, {in.data(), sum.data(), max.data()});
  EXPECT_EQ(sum, (std::vector<float>{6, -15}));
  EXPECT_EQ(max, (std::vector<float>{2, -5}));
}

TEST(InterpreterTest, ARowLevelValueStoredPerElementFillsItsRow) {
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {3, 1}, b.reduce(ReduceKind::Sum, b.load(0, {3, 1})));
  EXPECT_EQ(validation_error(k), "<valid>");
  std::vector<float> in = {1, 2, 3, 10, 20, 30}, out(6);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{6, 6, 6, 60, 60, 60}));
}

TEST(ValidateTest, RejectsAnElementLevelValueStoredPerRow) {
  Kernel k = make_kernel("k", {2, 3}, 1, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.load(0, {3, 1}));
  EXPECT_EQ(validation_error(k), "kernel k: an element-level value stored once per row");
}

TEST(ValidateTest, AcceptsAnyStoreOfAKernelWithoutRows) {
  // An empty channels-last [64, 0, 128, 1] normalized over its last two dims: ATen's strides
  // for it are {0, 1, 0, 0}, zero along the reduced dims (fuzz seed 13010 gave it back).
  Kernel k = make_kernel("k", {64, 0, 128, 1}, 2, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {0, 1, 0, 0}, b.load(0, {0, 128, 1, 1}));
  EXPECT_EQ(validation_error(k), "<valid>");
  interpret(k, {nullptr, nullptr});
}

TEST(InterpreterTest, EmptyRowsStillStoreTheirReductions) {
  // x.sum() of a [0, 4]: one row of no elements, whose sum 0 is stored (fuzz seed 16689 saw an
  // unwritten output when every store of a kernel with a size-0 dim counted as per element).
  Kernel k = make_kernel("k", {0, 4}, 2, {DType::Int64}, {DType::Int64});
  KernelBuilder b(k);
  b.store(1, {0, 0}, b.reduce(ReduceKind::Sum, b.load(0, {4, 1})));
  EXPECT_FALSE(stores_per_element(k, k.stores[0]));
  std::vector<int64_t> out = {77};
  interpret(k, {nullptr, out.data()});
  EXPECT_EQ(out[0], 0);
}

TEST(ValidateTest, RejectsAComparisonThatIsNotBool) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  k.exprs.push_back(raw_expr(Op::Lt, DType::Float32, {x, x}));
  b.store(1, {1}, 1);
  EXPECT_EQ(validation_error(k), "kernel k: comparison not of type bool");
}

TEST(ValidateTest, RejectsABadReduceRank) {
  Kernel k = make_kernel("k", {4}, 2, {DType::Float32}, {DType::Float32});
  EXPECT_EQ(validation_error(k), "kernel k: bad reduce_rank");
}

TEST(ValidateTest, RejectsAStoreOfAnUnknownExpr) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.load(0, {1});
  b.store(1, {1}, 5);
  EXPECT_EQ(validation_error(k), "kernel k: store of an unknown expr");
}

TEST(InterpreterTest, RefusesAnInvalidKernel) {
  Kernel k = make_kernel("k", {4}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(0, {1}, b.load(0, {1}));
  std::vector<float> in(4), out(4);
  EXPECT_THROW(interpret(k, {in.data(), out.data()}), std::invalid_argument);
}

TEST(InterpreterTest, RefusesTheWrongNumberOfBuffers) {
  Kernel k = convert_kernel(4, DType::Float32, DType::Float32);
  std::vector<float> in(4);
  EXPECT_THROW(interpret(k, {in.data()}), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::kernel
