// Reducing kernels vectorized across their rows (schedule.h: reduces_across_rows), against the
// reference interpreter: a reduction over dim 0 of a row-major tensor, reductions over two dims,
// NaN in max/min, a softmax and a normalization over a strided dim, a batch-1 linear on a
// transposed weight. Row counts cover the wide blocks (4 vectors), single vectors and the
// scalar tail at every width (see codegen_harness.h for the tolerances).
#include "backend/codegen/llvm/schedule.h"
#include "codegen/codegen_harness.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;

const std::vector<ReduceKind> kKinds = {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max,
                                        ReduceKind::Min};
const std::vector<int64_t> kRowCounts = {16, 37, 100};  // at 16 lanes: 1 vector; 2 + tail; 1 block

/// out[r] = reduce_i x[i, r] for x of [n, rows], row-major: each kernel row is a column.
Kernel column_kernel(ReduceKind kind, DType t, int64_t rows, int64_t n) {
  Kernel k =
      make_kernel(std::string("column_") + kernel::reduce_kind_name(kind) + "_" +
                      ir::dtype_name(t) + "_" + std::to_string(rows) + "x" + std::to_string(n),
                  {rows, n}, 1, {t}, {t});
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(kind, b.load(0, {1, rows})));
  return k;
}

ToleranceFor column_tolerance(ReduceKind kind, int64_t n, double unit = kU32) {
  return [=](int bits) {
    if (kind == ReduceKind::Max || kind == ReduceKind::Min) return Tolerance{};
    const double bound = sum_error(bits, n, static_cast<double>(n), unit);
    return kind == ReduceKind::Sum ? Tolerance{0, 0, bound} : Tolerance{0, unit, bound / n};
  };
}

TEST(AcrossRowsCodegenTest, TheScheduleIsChosenForColumnsOnly) {
  for (int width : {4, 8, 16}) {
    EXPECT_TRUE(reduces_across_rows(column_kernel(ReduceKind::Sum, F32, 64, 100), width));
    EXPECT_FALSE(reduces_across_rows(reduce_kernel(ReduceKind::Sum, F32, 64, 100), width));
  }
  // Fewer rows than lanes: nothing to vectorize across.
  EXPECT_FALSE(reduces_across_rows(column_kernel(ReduceKind::Sum, F32, 3, 100), 4));
  EXPECT_FALSE(reduces_across_rows(column_kernel(ReduceKind::Sum, F32, 64, 100), 1));
}

TEST(AcrossRowsCodegenTest, FloatReductionsOverDimZero) {
  std::vector<Case> cases;
  for (ReduceKind kind : kKinds)
    for (int64_t rows : kRowCounts)
      for (int64_t n : {1, 7, 1000}) {
        cases.push_back(make_case(column_kernel(kind, F32, rows, n), {uniform(-1, 1)},
                                  column_tolerance(kind, n)));
      }
  for (ReduceKind kind : kKinds)
    cases.push_back(make_case(column_kernel(kind, F64, 37, 300), {uniform(-1, 1)},
                              column_tolerance(kind, 300, 0x1p-53)));
  check(cases);
}

TEST(AcrossRowsCodegenTest, SixteenBitAndIntegerReductions) {
  std::vector<Case> cases;
  for (DType t : {F16, BF16})
    for (ReduceKind kind : kKinds) {
      ToleranceFor inner = column_tolerance(kind, 300);
      cases.push_back(
          make_case(column_kernel(kind, t, 37, 300), {uniform(-1, 1)}, [inner](int bits) {
            Tolerance tol = inner(bits);
            tol.ulp = 1;  // the result is rounded to the 16-bit format
            return tol;
          }));
    }
  for (DType t : {I32, I64, U8})
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min})
      cases.push_back(make_case(column_kernel(kind, t, 37, 50), {random_bits()}));
  check(cases);
}

TEST(AcrossRowsCodegenTest, MaxAndMinPropagateNaNPerRow) {
  // 37 rows of 40: row 0 has NaN first, row 5 in the middle, row 20 last, row 36 (the scalar
  // tail) in the middle; row 7 is all -inf/+inf; the other rows have none.
  std::vector<Case> cases;
  const int64_t rows = 37, n = 40;
  for (ReduceKind kind : {ReduceKind::Max, ReduceKind::Min})
    for (DType t : {F32, F16}) {
      Case c = make_case(column_kernel(kind, t, rows, n), {uniform(-1, 1)});
      auto at = [&](int64_t row, int64_t i, double v) {
        put(t, &c.inputs[0][(i * rows + row) * ir::dtype_size(t)], v);
      };
      at(0, 0, kNaN);
      at(5, 19, kNaN);
      at(20, n - 1, kNaN);
      at(36, 11, kNaN);
      for (int64_t i = 0; i < n; ++i)
        at(7, i, kind == ReduceKind::Max ? -kInf : kInf);
      cases.push_back(c);
    }
  check(cases);
}

TEST(AcrossRowsCodegenTest, ReductionOverTwoDims) {
  // mean over (N, H*W) of a channels-last [N, H*W, C] tensor: rows are channels (stride 1).
  std::vector<Case> cases;
  for (int64_t c : {16, 37}) {
    const int64_t batch = 3, hw = 45;
    Kernel k = make_kernel("channel_mean_" + std::to_string(c), {c, batch, hw}, 2, {F32}, {F32});
    KernelBuilder b(k);
    b.store(1, {1, 0, 0}, b.reduce(ReduceKind::Mean, b.load(0, {1, hw * c, c})));
    cases.push_back(make_case(k, {uniform(-1, 1)}, column_tolerance(ReduceKind::Mean, batch * hw)));
  }
  check(cases);
}

TEST(AcrossRowsCodegenTest, SoftmaxOverDimZero) {
  // softmax(x, dim=0) of x [n, rows]: two reductions and element stores, all across rows.
  std::vector<Case> cases;
  for (int64_t rows : kRowCounts) {
    const int64_t n = 33;
    Kernel k = make_kernel("softmax_dim0_" + std::to_string(rows), {rows, n}, 1, {F32}, {F32});
    KernelBuilder b(k);
    const int x = b.load(0, {1, rows});
    const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, b.reduce(ReduceKind::Max, x), F32), F32);
    b.store(1, {1, rows}, b.binary(Op::Div, e, b.reduce(ReduceKind::Sum, e), F32));
    cases.push_back(make_case(k, {uniform(-4, 4, {kInf, -kInf})}, [n](int bits) {
      return Tolerance{0, sum_error(bits, n, 1) + 6 * kU32, 0};
    }));
  }
  check(cases);
}

TEST(AcrossRowsCodegenTest, NormalizationWithRowLoadsAndRowStores) {
  // Per row r (a column of x): y = (x - mean) * scale[r] + shift[r], and the mean stored.
  std::vector<Case> cases;
  for (int64_t rows : kRowCounts) {
    const int64_t n = 50;
    Kernel k = make_kernel("normalize_dim0_" + std::to_string(rows), {rows, n}, 1, {F32, F32, F32},
                           {F32, F32});
    KernelBuilder b(k);
    const int x = b.load(0, {1, rows});
    const int mean = b.reduce(ReduceKind::Mean, x);
    const int scaled = b.binary(Op::Mul, b.binary(Op::Sub, x, mean, F32), b.load(1, {1, 0}), F32);
    b.store(3, {1, rows}, b.binary(Op::Add, scaled, b.load(2, {1, 0}), F32));
    b.store(4, {1, 0}, mean);
    cases.push_back(make_case(k, {uniform(1, 5), uniform(0.5, 1.5), uniform(-1, 1)}, [n](int bits) {
      return Tolerance{0, 4 * kU32, 2 * sum_error(bits, n, 5.0 * n) / n};
    }));
  }
  check(cases);
}

TEST(AcrossRowsCodegenTest, RowLevelValuesStoredPerElement) {
  // Per row r (a column of x): the column's max written to every element of the column, beside
  // the column minus it.
  std::vector<Case> cases;
  for (int64_t rows : kRowCounts) {
    const int64_t n = 50;
    Kernel k = make_kernel("max_per_element_dim0_" + std::to_string(rows), {rows, n}, 1, {F32},
                           {F32, F32});
    KernelBuilder b(k);
    const int x = b.load(0, {1, rows});
    const int max = b.reduce(ReduceKind::Max, x);
    b.store(1, {1, rows}, max);
    b.store(2, {1, rows}, b.binary(Op::Sub, x, max, F32));
    cases.push_back(make_case(k, {uniform(-5, 5)}));
  }
  check(cases);
}

TEST(AcrossRowsCodegenTest, BatchOneLinearOnATransposedWeight) {
  // y[j] = relu(sum_k x[k] * wt[k, j] + bias[j]): x broadcasts across rows, wt is read along them.
  std::vector<Case> cases;
  for (int64_t out : {37, 256}) {
    const int64_t in = 70;
    Kernel k =
        make_kernel("linear_wt_" + std::to_string(out), {out, in}, 1, {F32, F32, F32}, {F32});
    KernelBuilder b(k);
    const int dot =
        b.reduce(ReduceKind::Sum, b.binary(Op::Mul, b.load(0, {0, 1}), b.load(1, {1, out}), F32));
    const int biased = b.binary(Op::Add, dot, b.load(2, {1, 0}), F32);
    b.store(3, {1, 0}, b.binary(Op::Max, biased, b.constant(0, F32), F32));
    EXPECT_TRUE(reduces_across_rows(collapse_dims(k), 16));
    // Products may become FMAs (codegen_harness.h): their rounding is within the sum bound.
    cases.push_back(make_case(k, {uniform(-1, 1)}, [in](int bits) {
      return Tolerance{0, 0, 2 * sum_error(bits, in, in) + 2 * kU32};
    }));
  }
  check(cases);
}

TEST(AcrossRowsCodegenTest, UnevenPiecesOfTheLaunchRange) {
  // Pieces start and end inside runs of the last row dim ([3, 37] rows, 2 runs of 37).
  std::vector<Case> cases;
  Kernel k = make_kernel("pieces_columns", {3, 37, 20}, 1, {F32}, {F32});
  KernelBuilder b(k);
  b.store(1, {37, 1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {37 * 20, 1, 37})));
  cases.push_back(make_case(k, {uniform(-1, 1)}, column_tolerance(ReduceKind::Sum, 20)));
  cases.push_back(make_case(column_kernel(ReduceKind::Max, F32, 100, 9), {uniform(-1, 1)}));
  check(cases, Split::Pieces);
}

// Enough work for two pieces: the reduced dim is split (each piece reduces its stretch for every
// row) rather than the rows, which lie side by side in memory. Rows along memory stay whole.
TEST(AcrossRowsCodegenTest, LargeColumnReductionsSplitAlongTheReducedDim) {
  EXPECT_GT(reduction_pieces(collapse_dims(column_kernel(ReduceKind::Sum, F32, 100, 1000))), 0);
  EXPECT_EQ(reduction_pieces(collapse_dims(reduce_kernel(ReduceKind::Sum, F32, 100, 1000))), 0);
  EXPECT_EQ(reduction_pieces(collapse_dims(column_kernel(ReduceKind::Sum, F32, 100, 7))), 0);
  std::vector<Case> cases;
  for (ReduceKind kind : kKinds)
    cases.push_back(make_case(column_kernel(kind, F32, 40, 4096), {uniform(-1, 1)},
                              column_tolerance(kind, 4096)));
  check(cases, Split::Pieces);
}

// A vector against a matrix (a linear of one row on a transposed weight) has rows that are dot
// products of the same vector: threads take rows of their own, the reduced dim stays whole
// however long it is. A column sum of the same sizes is split.
TEST(AcrossRowsCodegenTest, AVectorAgainstAMatrixIsNotSplit) {
  const int64_t out = 256, in = 4096;
  Kernel k = make_kernel("linear_wt_long", {out, in}, 1, {F32, F32}, {F32});
  KernelBuilder b(k);
  b.store(
      2, {1, 0},
      b.reduce(ReduceKind::Sum, b.binary(Op::Mul, b.load(0, {0, 1}), b.load(1, {1, out}), F32)));
  const Kernel collapsed = collapse_dims(k);
  EXPECT_TRUE(reduces_across_rows(collapsed, 16));
  EXPECT_TRUE(kernel::reads_one_vector_for_every_row(collapsed));
  EXPECT_EQ(reduction_pieces(collapsed), 0);
  const Kernel column = collapse_dims(column_kernel(ReduceKind::Sum, F32, out, in));
  EXPECT_FALSE(kernel::reads_one_vector_for_every_row(column));
  EXPECT_GT(reduction_pieces(column), 0);
  check({make_case(k, {uniform(-1, 1)}, [](int bits) {
    return Tolerance{0, 0, 2 * sum_error(bits, in, in) + 2 * kU32};
  })});
}

// Two split kernels that differ only in their row count (rows 16 floats apart, whatever their
// count): their partials are laid out by their rows, so the second, compiled while the first's
// code is loaded, must not run the first's code.
TEST(AcrossRowsCodegenTest, SplitKernelsWithOtherRowCountsDoNotShareCode) {
  std::vector<Case> cases;
  for (int64_t rows : {8, 12}) {
    Kernel k = make_kernel("padded_columns_" + std::to_string(rows), {rows, 8192}, 1, {F32}, {F32});
    KernelBuilder b(k);
    b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {1, 16})));
    k.split_pieces = reduction_pieces(collapse_dims(k));
    ASSERT_GT(k.split_pieces, 0) << rows << " rows";
    cases.push_back(make_case(k, {uniform(-1, 1)}, column_tolerance(ReduceKind::Sum, 8192)));
  }
  CodegenOptions options;
  options.vector_bits = vector_widths().back();
  const CompiledKernels first = compile_kernels({cases[0].kernel}, options);
  const CompiledKernels second = compile_kernels({cases[1].kernel}, options);
  std::vector<Bytes> want = fresh_buffers(cases[1]), got = fresh_buffers(cases[1]);
  kernel::interpret(cases[1].kernel, pointers(want));
  run_compiled_kernel(second.kernels.at(0), pointers(got), {});
  expect_same_outputs(cases[1], want, got, "after the other", options.vector_bits);
}

}  // namespace
}  // namespace kiln::codegen
