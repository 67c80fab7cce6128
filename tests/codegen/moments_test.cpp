// A mean and the mean of the squared deviations from it share one pass over each row
// (backend/codegen/llvm/moments.h): which kernels qualify, and the accuracy of the shifted sums
// on rows made to cancel (a large offset, an outlier as the shift itself, tails at every vector
// width), in float32 and float64, against the reference interpreter.
#include "backend/codegen/llvm/moments.h"

#include "passes/ir/parser.h"
#include "passes/kernel/lower_group.h"

#include "tests/codegen/codegen_harness.h"

namespace kiln::codegen {
namespace codegen_test {
namespace {

// Row-level outputs: mean(x) and mean((x - mean) * (x - mean)) over rows of n.
Kernel stats_kernel(DType t, int64_t rows, int64_t n) {
  Kernel k = make_kernel("stats_" + std::to_string(n), {rows, n}, 1, {t}, {t, t});
  KernelBuilder b(k);
  const int x = b.load(0, {n, 1});
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int d = b.binary(Op::Sub, x, mean, t);
  b.store(1, {1, 0}, mean);
  b.store(2, {1, 0}, b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, t)));
  return k;
}

TEST(MomentsTest, AVarianceIsTheMeanOfSquaredDeviationsFromTheMeanOfTheSameValues) {
  const Kernel stats = stats_kernel(F32, 2, 64);
  EXPECT_EQ(variance_of(stats, 1), std::optional<int>(4));            // load, mean, sub, mul, mean
  EXPECT_EQ(variance_of(stats, 4), std::nullopt);                     // a variance has no variance
  EXPECT_EQ(variance_of(stats_kernel(F16, 2, 64), 1), std::nullopt);  // float32/64 only

  // Deviations of other values, a product of two different deviations, a sum: none.
  for (int variant = 0; variant < 3; ++variant) {
    Kernel k = make_kernel("not_var", {2, 64}, 1, {F32, F32}, {F32});
    KernelBuilder b(k);
    const int x = b.load(0, {64, 1}), y = b.load(1, {64, 1});
    const int mean = b.reduce(ReduceKind::Mean, x);
    const int d = b.binary(Op::Sub, variant == 0 ? y : x, mean, F32);
    const int e = variant == 1 ? b.binary(Op::Sub, y, mean, F32) : d;
    b.store(
        2, {1, 0},
        b.reduce(variant == 2 ? ReduceKind::Sum : ReduceKind::Mean, b.binary(Op::Mul, d, e, F32)));
    EXPECT_EQ(variance_of(k, mean), std::nullopt) << "variant " << variant;
  }
}

TEST(MomentsTest, AMeanAndItsVarianceShareOnePassWhereRowsHoldAVector) {
  using Passes = std::vector<RowPass>;
  const Passes one = {{{1, 4}, true}}, two = {{{1}}, {{4}}};
  EXPECT_EQ(row_passes(stats_kernel(F32, 2, 64), 16), one);
  EXPECT_EQ(row_passes(stats_kernel(F64, 2, 17), 8), one);
  EXPECT_EQ(row_passes(stats_kernel(F32, 2, 15), 16), two);  // no whole vector
  EXPECT_EQ(row_passes(stats_kernel(F32, 2, 64), 1), two);   // scalar code
  EXPECT_EQ(row_passes(stats_kernel(F16, 2, 64), 16), two);
  // A softmax: a max, then a sum, each its own pass.
  Kernel softmax = make_kernel("softmax", {2, 64}, 1, {F32}, {F32});
  KernelBuilder b(softmax);
  const int x = b.load(0, {64, 1});
  const int m = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, m, F32), F32);
  b.store(1, {64, 1}, b.binary(Op::Div, e, b.reduce(ReduceKind::Sum, e), F32));
  EXPECT_EQ(row_passes(softmax, 16), two);
}

TEST(MomentsTest, ReductionsThatDoNotReadEachOtherShareOnePass) {
  // sum(x), amax(x * y), then a sum of x - max: the first two in one walk over the row, the
  // third after them.
  Kernel k = make_kernel("siblings", {2, 64}, 1, {F32, F32}, {F32, F32, F32});
  KernelBuilder b(k);
  const int x = b.load(0, {64, 1}), y = b.load(1, {64, 1});
  const int sum = b.reduce(ReduceKind::Sum, x);
  const int max = b.reduce(ReduceKind::Max, b.binary(Op::Mul, x, y, F32));
  const int after = b.reduce(ReduceKind::Sum, b.binary(Op::Sub, x, max, F32));
  b.store(2, {1, 0}, sum);
  b.store(3, {1, 0}, max);
  b.store(4, {1, 0}, after);
  EXPECT_EQ(row_passes(k, 16), (std::vector<RowPass>{{{sum, max}}, {{after}}}));
}

TEST(MomentsTest, KilnDisableOnePassMomentsKeepsTwoPasses) {
  EXPECT_EQ(row_passes(stats_kernel(F32, 2, 64), 16, /*one_pass=*/false),
            (std::vector<RowPass>{{{1}}, {{4}}}));
  // The option reaches the emitter and is part of the code variant (the kernel cache's key).
  CodegenOptions two_pass;
  two_pass.one_pass_moments = false;
  EXPECT_FALSE(code_variant(two_pass) == code_variant({}));
  const std::vector<Kernel> kernels = {stats_kernel(F32, 4, 256)};
  EXPECT_NE(kernels_assembly(kernels, two_pass), kernels_assembly(kernels, {}));
}

TEST(MomentsTest, VarAndStdTakeOnePass) {
  for (const char* op : {"aten::var.correction", "aten::std.correction"}) {
    auto body = ir::parse_graph(std::string("graph(%x : f32[2,64]):\n  %v : f32[2] = ") + op +
                                "(%x) {dim=[1], correction=1, keepdim=false}\n  return (%v)\n");
    const auto passes = row_passes(kernel::lower_group(*body, "g"), 16);
    ASSERT_EQ(passes.size(), 1u) << op;
    EXPECT_TRUE(passes[0].moments) << op;
  }
}

// Rows of `n` values: offset + U(-1, 1), the first one replaced by `first` when it is finite.
Bytes rows_of(DType t, int64_t rows, int64_t n, double offset, double first, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  Bytes b(rows * n * ir::dtype_size(t));
  for (int64_t i = 0; i < rows * n; ++i) {
    const double v = i % n == 0 && std::isfinite(first) ? first : offset + dist(rng);
    put(t, &b[i * ir::dtype_size(t)], v);
  }
  return b;
}

// The error bound of the one-pass moments at `lanes` lanes. Each lane's sums of x_i - K_i and of
// its square (K_i the value its lane shifts by: the row's first vector, or its first element K0
// for the scalar tail) are sums of about n/lanes terms, off by at most (n/lanes + 3) u times the
// sum of their magnitudes; S2 - S1^2/n_lane cancels, so that error is absolute. The lanes then
// merge relative to K0: a sum over lanes (log2(lanes) + a few roundings) whose terms are at most
// |x_i - K0| for the mean and make up the variance itself. The mean then rounds once more when
// K0 is added back. The oracle's own errors come on top: in float32 its variance is about its
// mean rounded to float32 (off by up to an ulp of the mean, squared here); in float64 it has no
// wider type to compute in, so its sums carry the recursive-summation bound, n u sum |terms|.
struct Bounds {
  double mean, variance;
};
Bounds bounds(DType t, const uint8_t* row, int64_t n, int lanes) {
  const double u = t == F32 ? kU32 : 0x1p-53;
  const int64_t size = ir::dtype_size(t);
  const int64_t vectors = n / lanes * lanes;
  const double k0 = get(t, row);
  double squares = 0, deviations = 0, from_k0 = 0, sum = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = get(t, row + i * size);
    const double k = get(t, row + (i < vectors ? i % lanes : 0) * size);
    squares += (x - k) * (x - k);
    deviations += std::abs(x - k);
    from_k0 += std::abs(x - k0);
    sum += x;
    magnitude += std::abs(x);
  }
  const double mean = sum / n;
  double variance = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = get(t, row + i * size) - mean;
    variance += d * d / n;
  }
  const double within = static_cast<double>(n) / lanes + 3;
  const double across = std::log2(lanes) + 8;
  const double oracle = t == F64 ? static_cast<double>(n) * u : 0;
  return {
      (within * deviations + across * from_k0) * u / n + 2 * u * std::abs(mean) +
          oracle * magnitude / n,
      2 * within * u * squares / n + (across * u + oracle) * variance + std::pow(2 * u * mean, 2)};
}

TEST(MomentsTest, OnePassStatisticsStayWithinTheirBoundOnRowsMadeToCancel) {
  struct Shape {
    double offset, first;
  };
  // Plain rows; a large offset (the sums of squares cancel without the shift); an outlier that
  // is itself lane 0's shift.
  const Shape shapes[] = {{0, kNaN}, {1e4, kNaN}, {0, 1e4}, {-3e5, 7}};
  int checked = 0;
  for (DType t : {F32, F64}) {
    for (int64_t n : {16, 17, 64, 1000, 1024, 4099}) {
      for (const Shape& shape : shapes) {
        constexpr int64_t rows = 3;
        const Kernel k = stats_kernel(t, rows, n);
        const Bytes input = rows_of(t, rows, n, shape.offset, shape.first, n + checked);
        const int64_t size = ir::dtype_size(t);
        Bytes want_mean(rows * size), want_var(rows * size);
        Bytes in = input;
        kernel::interpret(k, {in.data(), want_mean.data(), want_var.data()});
        for (int bits : vector_widths()) {
          CodegenOptions options;
          options.vector_bits = bits;
          const CompiledKernels compiled = compile_kernels({k}, options);
          Bytes mean(rows * size), var(rows * size);
          void* buffers[] = {in.data(), mean.data(), var.data()};
          compiled.kernels.at(0).function(buffers, nullptr, 0, rows);
          for (int64_t r = 0; r < rows; ++r) {
            const Bounds bound = bounds(t, &input[r * n * size], n, bits / 32);
            const double m = get(t, &mean[r * size]), v = get(t, &var[r * size]);
            const double want_m = get(t, &want_mean[r * size]);
            const double want_v = get(t, &want_var[r * size]);
            EXPECT_LE(std::abs(m - want_m), bound.mean)
                << "mean, n " << n << " offset " << shape.offset << " first " << shape.first
                << " bits " << bits << (t == F32 ? " f32" : " f64");
            EXPECT_LE(std::abs(v - want_v), bound.variance)
                << "variance " << want_v << ", n " << n << " offset " << shape.offset << " first "
                << shape.first << " bits " << bits << (t == F32 ? " f32" : " f64");
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(MomentsTest, LongRowsAccumulateTheirShiftedSumsInChunks) {
  // Rows of 2^21 values (i % 3) * (1 + 2^-13): the shifted values d are small multiples of
  // 1 + 2^-13 and d * d of 1 + 2^-12 (plus 2^-26), so a sum keeps their fractions while it stays
  // below 2^11. A chunk's accumulators do (at most 4096 at 4 lanes); the row's add one chunk sum
  // per chunk (128 of them), each rounded once: ~2^-17 relative at most, 1.5e-6 measured. Without
  // the chunks an accumulator of 2^21 / (lanes * 4) terms rounds every term past 2^11, ~1e-3.
  constexpr int64_t rows = 2, n = int64_t{1} << 21;
  const Kernel k = stats_kernel(F32, rows, n);
  Bytes input(rows * n * 4);
  for (int64_t i = 0; i < rows * n; ++i)
    put(F32, &input[i * 4], static_cast<double>(i % 3) * (1 + std::ldexp(1.0, -13)));
  Bytes want_mean(rows * 4), want_var(rows * 4);
  kernel::interpret(k, {input.data(), want_mean.data(), want_var.data()});
  for (int bits : vector_widths()) {
    CodegenOptions options;
    options.vector_bits = bits;
    const CompiledKernels compiled = compile_kernels({k}, options);
    Bytes mean(rows * 4), var(rows * 4);
    void* buffers[] = {input.data(), mean.data(), var.data()};
    compiled.kernels.at(0).function(buffers, nullptr, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      const double want_m = get(F32, &want_mean[r * 4]), want_v = get(F32, &want_var[r * 4]);
      EXPECT_NEAR(get(F32, &mean[r * 4]), want_m, std::ldexp(want_m, -16)) << "bits " << bits;
      EXPECT_NEAR(get(F32, &var[r * 4]), want_v, std::ldexp(want_v, -16)) << "bits " << bits;
    }
  }
}

// Rows whose one-pass variance is not finite take the two passes: a NaN or an infinity (the
// variance is NaN, as eager's: inf - inf), and a value so large that the squares overflow (the
// shifted sums would make inf - inf = NaN; the two passes, like eager, an infinite variance).
TEST(MomentsTest, RowsWithoutAFiniteVarianceTakeTheTwoPasses) {
  for (DType t : {F32, F64}) {
    const double huge = t == F32 ? 1.7e38 : 8.9e307;
    for (double special : {kNaN, kInf, -kInf, huge}) {
      const Kernel k = stats_kernel(t, 2, 100);
      const int64_t size = ir::dtype_size(t);
      Bytes input = rows_of(t, 2, 100, 0, kNaN, 3);
      put(t, &input[(100 + 37) * size], special);  // row 1 only
      Bytes want_mean(2 * size), want_var(2 * size), mean(2 * size), var(2 * size);
      Bytes in = input;
      kernel::interpret(k, {in.data(), want_mean.data(), want_var.data()});
      const CompiledKernels compiled = compile_kernels({k}, {});
      void* buffers[] = {input.data(), mean.data(), var.data()};
      compiled.kernels.at(0).function(buffers, nullptr, 0, 2);
      EXPECT_TRUE(std::isfinite(get(t, &var[0])));
      const double v = get(t, &var[size]), want = get(t, &want_var[size]);
      EXPECT_TRUE(std::isnan(want) ? std::isnan(v) : v == want)
          << special << ": variance " << v << ", the oracle's " << want;
      EXPECT_TRUE(std::isnan(v) || std::isinf(v)) << special;
    }
  }
}

// A layer norm of tanh(x): the tanh is kept in a scratch row for the later passes, which the one
// pass of moments must fill (the fuzzer found it reading a scratch row of deviations it never
// wrote). Rows of one and more vectors, with and without a tail, one row and several.
TEST(MomentsTest, AnExpensiveValueTheStatisticsReadIsKeptForTheStores) {
  std::vector<Case> cases;
  for (int64_t rows : {1, 3}) {
    for (int64_t n : {30, 64}) {
      Kernel k = make_kernel("normalized_tanh_" + std::to_string(n), {rows, n}, 1, {F32}, {F32});
      KernelBuilder b(k);
      const int x = b.unary(Op::Tanh, b.load(0, {n, 1}), F32);
      const int d = b.binary(Op::Sub, x, b.reduce(ReduceKind::Mean, x), F32);
      const int var = b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, F32));
      const int rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.constant(0.1, F32), F32), F32);
      b.store(1, {n, 1}, b.binary(Op::Mul, d, rstd, F32));
      // tanh's few ulps and the one-pass statistics' error, over values in (-1, 1).
      cases.push_back(make_case(k, {uniform(-2, 2)}, [](int) { return Tolerance{0, 1e-5, 1e-5}; }));
    }
  }
  check(cases);
}

}  // namespace
}  // namespace codegen_test
}  // namespace kiln::codegen
