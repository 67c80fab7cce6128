// Reductions, softmax and layer norm kernels, and kernels run in uneven pieces of their launch
// range, against the reference interpreter (see codegen_harness.h for the tolerances).
#include <tuple>

#include "codegen/codegen_harness.h"
#include "passes/kernel/access_order.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;

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

TEST(KernelCodegenTest, SiblingReductionsInOnePass) {
  // Batch norm's backward over [channels, n, hw]: the sum of g masked by y > 0, and the sum of
  // that times x - mean, read together; then amin and amax of one row, NaNs included.
  // Channels-last, the same sums reduce across rows (schedule.h), walking N and HW together.
  std::vector<Case> cases;
  for (auto [n, hw, channels_last] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {1, 7, false}, {3, 100, false}, {8, 196, false}, {3, 100, true}, {2, 40, true}}) {
    const int64_t c = channels_last ? 16 : 4;  // at least a vector of rows to go across
    Kernel k = make_kernel("bn_backward_sums_" + std::to_string(n) + "x" + std::to_string(hw) +
                               (channels_last ? "_nhwc" : ""),
                           {c, n, hw}, 2, {F32, F32, F32, F32}, {F32, F32, F32});
    KernelBuilder b(k);
    const std::vector<int64_t> nchw =
        channels_last ? std::vector<int64_t>{1, c * hw, c} : std::vector<int64_t>{hw, c * hw, 1};
    const int y = b.load(0, nchw), g = b.load(1, nchw), x = b.load(2, nchw);
    const int mean = b.load(3, {1, 0, 0});
    const int dg =
        b.where(b.binary(Op::Gt, y, b.constant(0, F32), DType::Bool), g, b.constant(0, F32), F32);
    const int sum_g = b.reduce(ReduceKind::Sum, dg);
    const int sum_gx =
        b.reduce(ReduceKind::Sum, b.binary(Op::Mul, dg, b.binary(Op::Sub, x, mean, F32), F32));
    b.store(4, {1, 0, 0}, sum_g);
    b.store(5, {1, 0, 0}, sum_gx);
    b.store(6, nchw, b.binary(Op::Mul, dg, b.binary(Op::Add, sum_g, sum_gx, F32), F32));
    EXPECT_EQ(kernel::reduces_across_rows(k, 16), channels_last) << k.name;
    const double bound = sum_error(32, n * hw, n * hw * 4.0, kU32);
    cases.push_back(make_case(k, {uniform(-1, 1), uniform(-1, 1), uniform(-1, 1), uniform(-1, 1)},
                              [bound](int) {
                                return Tolerance{0, 0, 8 * bound};
                              }));
  }
  Kernel k = make_kernel("amin_amax", {5, 1000}, 1, {F32}, {F32, F32});
  KernelBuilder b(k);
  const int x = b.load(0, {1000, 1});
  b.store(1, {1, 0}, b.reduce(ReduceKind::Min, x));
  b.store(2, {1, 0}, b.reduce(ReduceKind::Max, x));
  cases.push_back(make_case(k, {uniform(-1, 1, {kNaN, kInf, -kInf})}));
  check(cases);
}

TEST(KernelCodegenTest, LongRowFloatSumsAccumulateInChunks) {
  // Two rows of 2^21 copies of 1 + 2^-13. In chunks of 16384 elements (kernel_emitter.cpp:
  // kSumChunk) an accumulator adds at most 1024 terms (4 lanes, unrolled 4 times) before it is
  // folded into the row's, which adds one chunk's sum (2^10 + 2^-3 at most) per chunk: every
  // partial sum is exact, and so is the row's, 2^21 + 2^8 (the interpreter sums in double).
  // Unchunked, an accumulator adds 2^21 / (lanes * 4) terms, and each term past 2^11 loses its
  // 2^-13: the sum would be short by ~2^9 at 16 lanes.
  const int64_t n = int64_t{1} << 21;
  const Fill ones = [](DType t, int64_t count, std::mt19937_64&) {
    Bytes bytes(count * ir::dtype_size(t));
    for (int64_t i = 0; i < count; ++i)
      put(t, &bytes[i * ir::dtype_size(t)], 1 + std::ldexp(1.0, -13));
    return bytes;
  };
  check({make_case(reduce_kernel(ReduceKind::Sum, F32, 2, n), {ones}),
         make_case(reduce_kernel(ReduceKind::Mean, F32, 2, n), {ones})});
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

// ---- Full reductions, split into pieces (kernel/split_reduction.h)
// -------------------------------

/// [n] reduced whole: b1 = kind(b0).
Kernel full_reduce_kernel(ReduceKind kind, DType t, int64_t n) {
  Kernel k =
      make_kernel(std::string("full_") + kernel::reduce_kind_name(kind) + "_" + ir::dtype_name(t),
                  {n}, 1, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {0}, b.reduce(kind, b.load(0, {1})));
  return k;
}

TEST(KernelCodegenTest, FullReductionsSplitIntoPieces) {
  // 3 * 65536 elements: pieces of at least the grain (32768), so 6 of them; run whole and with
  // the pieces cut unevenly between calls, as threads would take them.
  const int64_t n = 3 * 65536;
  std::vector<Case> cases;
  for (ReduceKind kind : kKinds) {
    cases.push_back(
        make_case(full_reduce_kernel(kind, F32, n), {uniform(-1, 1)}, sum_tolerance(kind, n, 1)));
    ToleranceFor inner = sum_tolerance(kind, n, 1);
    cases.push_back(
        make_case(full_reduce_kernel(kind, BF16, n), {uniform(-1, 1)}, [inner](int bits) {
          Tolerance tol = inner(bits);
          tol.ulp = 1;  // rounded once to bfloat16
          return tol;
        }));
  }
  cases.push_back(
      make_case(full_reduce_kernel(ReduceKind::Sum, DType::Int64, n), {ints(-1000, 1000)}));
  for (ReduceKind kind : {ReduceKind::Max, ReduceKind::Min}) {
    Case c = make_case(full_reduce_kernel(kind, F32, n), {uniform(-1, 1)});
    c.kernel.name += "_nan";
    put(F32, &c.inputs[0][(n - 40000) * 4], kNaN);  // in the last piece but one
    cases.push_back(c);
  }
  {
    // y = x * s stored per element beside sum(y) + 1 and max(y): the partial kernel stores y.
    Kernel k = make_kernel("full_siblings", {n}, 1, {F32, F32}, {F32, F32, F32});
    KernelBuilder b(k);
    const int y = b.binary(Op::Mul, b.load(0, {1}), b.load(1, {0}), F32);
    b.store(2, {1}, y);
    b.store(3, {0}, b.binary(Op::Add, b.reduce(ReduceKind::Sum, y), b.constant(1, F32), F32));
    b.store(4, {0}, b.reduce(ReduceKind::Max, y));
    cases.push_back(make_case(k, {uniform(-1, 1), uniform(0.5, 2)}, [n](int bits) {
      return Tolerance{0, kU32, sum_error(bits, n, 2.0 * n)};
    }));
  }
  {
    // The mean and the variance (a layer norm's statistics, over everything): each piece's
    // variance merges with the spread of the pieces' means. x rises across the row, so that
    // spread is most of the variance (~1.42 of it); the tolerance is twice the bound of a sum
    // of values up to 5 (the squared deviations are below 4).
    Kernel k = make_kernel("full_variance", {n}, 1, {F32}, {F32, F32});
    KernelBuilder b(k);
    const int x = b.load(0, {1});
    const int mean = b.reduce(ReduceKind::Mean, x);
    const int d = b.binary(Op::Sub, x, mean, F32);
    b.store(1, {0}, mean);
    b.store(2, {0}, b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, F32)));
    const Fill rising = [](DType t, int64_t count, std::mt19937_64& rng) {
      Bytes bytes(count * ir::dtype_size(t));
      std::uniform_real_distribution<double> jitter(-0.5, 0.5);
      for (int64_t i = 0; i < count; ++i)
        put(t, &bytes[i * ir::dtype_size(t)], 1 + 4.0 * i / count + jitter(rng));
      return bytes;
    };
    cases.push_back(make_case(k, {rising}, [n](int bits) {
      return Tolerance{0, 0, 2 * sum_error(bits, n, 5.0 * n) / n};
    }));
  }
  for (const Case& c : cases)
    EXPECT_EQ(split_reduction(collapse_dims(c.kernel)).value().pieces, 6) << c.kernel.name;
  check(cases);
  check(cases, Split::Pieces);
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

TEST(KernelCodegenTest, RowLevelValuesStoredPerElement) {
  // A row-level value written to every element of its row: the row's sum beside an element
  // value, and a kernel with no element-level value at all (a softmax of an input broadcast
  // along its rows, which the builder folds to row values: exp(0) / n).
  std::vector<Case> cases;
  for (int64_t n : kRowSizes) {
    Kernel k =
        make_kernel("row_sum_per_element_" + std::to_string(n), {5, n}, 1, {F32}, {F32, F32});
    KernelBuilder b(k);
    const int x = b.load(0, {n, 1});
    b.store(1, {n, 1}, b.reduce(ReduceKind::Sum, x));
    b.store(2, {n, 1}, b.unary(Op::Neg, x, F32));
    cases.push_back(make_case(k, {uniform(-1, 1)}, [n](int bits) {
      return Tolerance{0, 0, sum_error(bits, n, static_cast<double>(n))};
    }));
  }
  for (DType t : {F32, I64}) {
    const int64_t rows = 4, n = 27;
    Kernel k =
        make_kernel(std::string("row_values_only_") + ir::dtype_name(t), {rows, n}, 1, {t}, {t});
    KernelBuilder b(k);
    const int x = b.load(0, {1, 0});
    const int shifted = b.binary(Op::Sub, x, b.reduce(ReduceKind::Max, x), t);
    b.store(1, {n, 1}, b.binary(Op::Add, shifted, b.reduce(ReduceKind::Sum, x), t));
    cases.push_back(make_case(k, {t == I64 ? ints(-1000, 1000) : uniform(-1, 1)}));
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
