// split_full_reduction and split_into_pieces: the partial and finish kernels, run by the
// interpreter, compute what the whole kernel does; and the kernels it must leave whole.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/split_reduction.h"
#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

using testing::make_kernel;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Runs `split` as a runtime would: partial over the kernel's buffers and a workspace of
/// partials, then finish over the buffers finish_buffers names.
void run_split(const SplitReduction& split, const std::vector<void*>& buffers) {
  std::vector<std::vector<uint8_t>> workspace;
  std::vector<void*> all = buffers;
  for (size_t b = buffers.size(); b < split.partial.buffers.size(); ++b) {
    workspace.emplace_back(
        split.pieces * split.rows * ir::dtype_size(split.partial.buffers[b].dtype), 0xAB);
    all.push_back(workspace.back().data());
  }
  interpret(split.partial, all);
  std::vector<void*> finish;
  for (int b : split.finish_buffers)
    finish.push_back(all[b]);
  interpret(split.finish, finish);
}

/// x[i] = (i * 7) % 13 - 6: small integers, so float sums are exact in any order.
std::vector<float> ramp(int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>((i * 7) % 13 - 6);
  return x;
}

TEST(SplitReductionTest, SumOfAProductIsSummedByPieces) {
  Kernel k = make_kernel("k", {1024}, 1, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int product = b.binary(Op::Mul, b.load(0, {1}), b.load(1, {1}), DType::Float32);
  b.store(2, {0}, b.reduce(ReduceKind::Sum, product));
  const auto split = split_full_reduction(k, /*min_piece_elements=*/100, /*max_pieces=*/64);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->pieces, 8);  // the largest divisor of 1024 with pieces of >= 100 elements
  EXPECT_EQ(split->partial.sizes, (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(split->finish.sizes, (std::vector<int64_t>{8}));
  EXPECT_EQ(split->finish_buffers, (std::vector<int>{0, 1, 3, 2}));
  std::vector<float> x = ramp(1024), y = ramp(1024), want(1), got(1);
  std::reverse(y.begin(), y.end());
  interpret(k, {x.data(), y.data(), want.data()});
  run_split(*split, {x.data(), y.data(), got.data()});
  EXPECT_EQ(got, want);
}

// A per-channel mean of a channels-last [32, 56, 56] map (rows side by side in memory), scaled
// per row after it, beside an element store: split along its outermost reduced dim, each piece
// reduces its stretch of pixels for every row, and finish folds the pieces row by row.
TEST(SplitReductionTest, RowsAreSplitAlongTheirOutermostReducedDim) {
  const DType f = DType::Float32;
  Kernel k = make_kernel("k", {32, 56, 56}, 2, {f, f}, {f, f});
  KernelBuilder b(k);
  const int x = b.load(0, {1, 56 * 32, 32});
  b.store(2, {1, 56 * 32, 32}, b.binary(Op::Mul, x, b.constant(2, f), f));
  b.store(3, {1, 0, 0}, b.binary(Op::Mul, b.reduce(ReduceKind::Mean, x), b.load(1, {1, 0, 0}), f));
  EXPECT_EQ(full_reduction_pieces(k, 10000, 64), 0);  // it has rows
  const int64_t pieces = reduced_dim_pieces(k, /*min_piece_elements=*/10000, /*max_pieces=*/64);
  EXPECT_EQ(pieces, 8);  // the largest divisor of 56 with pieces of >= 10000 elements
  const auto split = split_into_pieces(k, pieces);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->rows, 32);
  EXPECT_EQ(split->partial.sizes, (std::vector<int64_t>{8, 32, 7, 56}));
  EXPECT_EQ(split->finish.sizes, (std::vector<int64_t>{32, 8}));
  std::vector<float> input = ramp(32 * 56 * 56), scale = ramp(32);
  std::vector<float> want_y(input.size()), want_mean(32), got_y(input.size(), kNaN),
      got_mean(32, kNaN);
  interpret(k, {input.data(), scale.data(), want_y.data(), want_mean.data()});
  run_split(*split, {input.data(), scale.data(), got_y.data(), got_mean.data()});
  EXPECT_EQ(got_y, want_y);
  for (int r = 0; r < 32; ++r)
    EXPECT_NEAR(got_mean[r], want_mean[r], 1e-5 * (1 + std::fabs(want_mean[r]))) << "row " << r;
}

TEST(SplitReductionTest, SiblingsWithAnElementStoreAndARowEpilogue) {
  // y = 2x per element; sum, mean, max, min of y; sum * scale + 1 after them (scale a
  // row-level load, as a 0-dim input is).
  const DType f = DType::Float32;
  Kernel k = make_kernel("k", {600}, 1, {f, f}, {f, f, f, f, f});
  KernelBuilder b(k);
  const int y = b.binary(Op::Mul, b.load(0, {1}), b.constant(2, f), f);
  b.store(2, {1}, y);
  const int sum = b.reduce(ReduceKind::Sum, y);
  b.store(3, {0},
          b.binary(Op::Add, b.binary(Op::Mul, sum, b.load(1, {0}), f), b.constant(1, f), f));
  b.store(4, {0}, b.reduce(ReduceKind::Mean, y));
  b.store(5, {0}, b.reduce(ReduceKind::Max, y));
  b.store(6, {0}, b.reduce(ReduceKind::Min, y));
  const auto split = split_full_reduction(k, 100, 64);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->pieces, 6);
  for (bool with_nan : {false, true}) {
    std::vector<float> x = ramp(600), scale = {0.5f};
    if (with_nan) x[417] = kNaN;
    std::vector<std::vector<float>> want = {std::vector<float>(600), {0}, {0}, {0}, {0}};
    std::vector<std::vector<float>> got = want;
    auto pointers = [&](std::vector<std::vector<float>>& out) {
      std::vector<void*> p = {x.data(), scale.data()};
      for (auto& o : out)
        p.push_back(o.data());
      return p;
    };
    interpret(k, pointers(want));
    run_split(*split, pointers(got));
    for (size_t o = 0; o < want.size(); ++o) {
      for (size_t i = 0; i < want[o].size(); ++i) {
        if (std::isnan(want[o][i])) {
          EXPECT_TRUE(std::isnan(got[o][i])) << "output " << o << " element " << i;
        } else {
          EXPECT_EQ(got[o][i], want[o][i]) << "output " << o << " element " << i;
        }
      }
    }
    EXPECT_EQ(std::isnan(got[3][0]), with_nan);  // the max saw the NaN in its piece
  }
}

TEST(SplitReductionTest, HalfSumsAreCarriedInFloat32) {
  Kernel k = make_kernel("k", {3000}, 1, {DType::Float16}, {DType::Float16});
  KernelBuilder b(k);
  b.store(1, {0}, b.reduce(ReduceKind::Sum, b.load(0, {1})));
  const auto split = split_full_reduction(k, 512, 64);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->pieces, 5);
  EXPECT_EQ(split->partial.buffers.back().dtype, DType::Float32);
  EXPECT_EQ(split->finish.exprs.back().op, Op::Cast);      // rounded to float16 once, at the end
  std::vector<uint16_t> x(3000, 0x3C01), want(1), got(1);  // 1 + 2^-10
  interpret(k, {x.data(), want.data()});
  run_split(*split, {x.data(), got.data()});
  EXPECT_EQ(got, want);
}

TEST(SplitReductionTest, APieceCountDividesTheOutermostReducedDim) {
  // A strided [6, 100] reduced over both dims (not collapsible): pieces split the 6.
  Kernel k = make_kernel("k", {6, 100}, 2, {DType::Int64}, {DType::Int64});
  KernelBuilder b(k);
  b.store(1, {0, 0}, b.reduce(ReduceKind::Sum, b.load(0, {200, 1})));
  const auto split = split_full_reduction(k, 100, 64);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->pieces, 6);
  EXPECT_EQ(split->partial.exprs[0].map.strides, (std::vector<int64_t>{200, 200, 1}));
  std::vector<int64_t> x(1200), want(1), got(1);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<int64_t>(i * i);
  interpret(k, {x.data(), want.data()});
  run_split(*split, {x.data(), got.data()});
  EXPECT_EQ(got, want);
}

TEST(SplitReductionTest, RandomFullReductionsMatchTheWholeKernel) {
  // Random [d0, d1] kernels reduced whole: inputs read contiguous, transposed or broadcast,
  // a scalar input, element values of a few ops, 1-3 sibling reductions of any kind, a scalar
  // epilogue after one, and sometimes an element store beside them. Values are small integers,
  // so sums are exact in any order; means differ by the rounding of the pieces' means.
  const DType f = DType::Float32;
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  int splits = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t d0 = std::vector<int64_t>{6, 8, 12, 30}[pick(4)];
    const int64_t d1 = std::vector<int64_t>{1, 5, 16}[pick(3)];
    const int64_t n = d0 * d1;
    const int reductions = 1 + pick(3);
    const bool element_store = pick(2) == 0;
    std::vector<DType> outputs(reductions, f);
    if (element_store) outputs.push_back(f);
    Kernel k = make_kernel("random", {d0, d1}, 2, {f, f, f}, outputs);
    KernelBuilder b(k);
    const std::vector<std::vector<int64_t>> maps = {{d1, 1}, {1, d0}, {0, 1}, {d1, 0}};
    std::vector<int> values = {b.load(0, maps[pick(4)]), b.load(1, maps[pick(4)])};
    const int scalar = b.load(2, {0, 0});
    for (int op = pick(4); op > 0; --op) {
      const Op o = std::vector<Op>{Op::Add, Op::Sub, Op::Mul, Op::Max}[pick(4)];
      values.push_back(b.binary(o, values[pick(values.size())], values[pick(values.size())], f));
    }
    for (int r = 0; r < reductions; ++r) {
      const auto kind = static_cast<ReduceKind>(pick(4));
      int out = b.reduce(kind, values[pick(values.size())]);
      if (r == 0 && pick(2))
        out = b.binary(Op::Add, b.binary(Op::Mul, out, scalar, f), b.constant(1, f), f);
      b.store(3 + r, {0, 0}, out);
    }
    if (element_store) b.store(3 + reductions, {d1, 1}, values.back());
    const auto split = split_full_reduction(k, 1 + pick(8), 2 + pick(16));
    if (!split) continue;
    ++splits;
    std::vector<std::vector<float>> in(3, std::vector<float>(n));
    for (auto& buffer : in)
      for (float& v : buffer)
        v = static_cast<float>(pick(17) - 8);
    auto run = [&](bool pieces) {
      std::vector<std::vector<float>> out;
      for (int r = 0; r < reductions; ++r)
        out.emplace_back(1, -1.0f);
      if (element_store) out.emplace_back(n, -1.0f);
      std::vector<void*> p = {in[0].data(), in[1].data(), in[2].data()};
      for (auto& o : out)
        p.push_back(o.data());
      if (pieces) {
        run_split(*split, p);
      } else {
        interpret(k, p);
      }
      return out;
    };
    const auto want = run(false), got = run(true);
    for (size_t o = 0; o < want.size(); ++o)
      for (size_t i = 0; i < want[o].size(); ++i)
        EXPECT_NEAR(got[o][i], want[o][i], 1e-5 * std::max(1.0f, std::abs(want[o][i])))
            << "trial " << trial << " output " << o << " element " << i << " pieces "
            << split->pieces;
  }
  EXPECT_GT(splits, 250);  // most piece limits admit a divisor of d0
}

/// x.std(correction=1) as the lowering writes it, and the mean beside it: mean m, the mean of
/// (x - m)^2, times n / (n - 1), its square root.
Kernel std_kernel(DType t, int64_t n) {
  Kernel k = make_kernel("std", {n}, 1, {t}, {t, t});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int d = b.binary(Op::Sub, x, mean, t);
  const int var = b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, t));
  const double scale = static_cast<double>(n) / static_cast<double>(n - 1);
  b.store(1, {0}, b.unary(Op::Sqrt, b.binary(Op::Mul, var, b.constant(scale, t), t), t));
  b.store(2, {0}, mean);
  return k;
}

template <typename T>
void expect_std_split_matches(DType t, double tolerance) {
  const int64_t n = 6000;
  const Kernel k = std_kernel(t, n);
  const auto split = split_full_reduction(k, 500, 64);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->pieces, 12);
  // The pieces differ in mean (a slope) around a large offset, so the merge's between-piece
  // term carries most of the variance; the exact answer comes from the same values in double.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1);
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<T>(1000 + 0.01 * static_cast<double>(i) + noise(rng));
  double mean = 0, m2 = 0;
  for (T v : x)
    mean += static_cast<double>(v);
  mean /= n;
  for (T v : x)
    m2 += (static_cast<double>(v) - mean) * (static_cast<double>(v) - mean);
  const double want_std = std::sqrt(m2 / static_cast<double>(n - 1));
  std::vector<T> whole(2), got(2);
  interpret(k, {x.data(), &whole[0], &whole[1]});
  run_split(*split, {x.data(), &got[0], &got[1]});
  EXPECT_NEAR(got[0], want_std, tolerance * want_std);
  EXPECT_NEAR(got[1], mean, tolerance * mean);
  EXPECT_NEAR(got[0], whole[0], tolerance * want_std);  // the whole kernel, two passes
}

TEST(SplitReductionTest, PiecesMergeTheirMeansAndVariances) {
  expect_std_split_matches<float>(DType::Float32, 1e-5);
  expect_std_split_matches<double>(DType::Float64, 1e-12);
  // The finish kernel merges: a mean of the pieces' means and, for the variance, a mean of
  // their variances plus a mean of the squared deviations of their means.
  const auto split = split_full_reduction(std_kernel(DType::Float32, 6000), 500, 64);
  ASSERT_TRUE(split.has_value());
  int reductions = 0;
  for (const Expr& e : split->finish.exprs)
    reductions += e.op == Op::Reduce;
  EXPECT_EQ(reductions, 3);
  EXPECT_EQ(split->partial.buffers.size(), 5u);  // x, std, mean, and the two partials
}

TEST(SplitReductionTest, LeavesWholeWhatItCannotSplit) {
  const DType f = DType::Float32;
  auto sum_kernel = [&](std::vector<int64_t> sizes, int reduce_rank) {
    Kernel k = make_kernel("k", sizes, reduce_rank, {f}, {f});
    KernelBuilder b(k);
    std::vector<int64_t> in(sizes.size(), 0), out(sizes.size(), 0);
    in.back() = 1;
    if (sizes.size() == 2) in[0] = sizes[1], out[0] = 1;
    b.store(1, out, b.reduce(ReduceKind::Sum, b.load(0, in)));
    return k;
  };
  EXPECT_TRUE(split_full_reduction(sum_kernel({4096}, 1), 512, 64).has_value());
  EXPECT_FALSE(split_full_reduction(sum_kernel({4, 4096}, 1), 512, 64).has_value());  // rows
  EXPECT_FALSE(split_full_reduction(sum_kernel({4093}, 1), 512, 64).has_value());     // prime
  EXPECT_FALSE(split_full_reduction(sum_kernel({1000}, 1), 512, 64).has_value());     // small

  // A sum of squared deviations (not a mean of them) is no variance that pieces merge.
  Kernel spread = make_kernel("spread", {4096}, 1, {f}, {f});
  {
    KernelBuilder b(spread);
    const int x = b.load(0, {1});
    const int d = b.binary(Op::Sub, x, b.reduce(ReduceKind::Mean, x), f);
    b.store(1, {0}, b.reduce(ReduceKind::Sum, b.binary(Op::Mul, d, d, f)));
  }
  EXPECT_FALSE(split_full_reduction(spread, 512, 64).has_value());

  // x - x.mean() stored per element reads the reduction.
  Kernel centred = make_kernel("centred", {4096}, 1, {f}, {f});
  {
    KernelBuilder b(centred);
    const int x = b.load(0, {1});
    b.store(1, {1}, b.binary(Op::Sub, x, b.reduce(ReduceKind::Mean, x), f));
  }
  EXPECT_FALSE(split_full_reduction(centred, 512, 64).has_value());

  // An integer mean truncates.
  Kernel int_mean = make_kernel("int_mean", {4096}, 1, {DType::Int64}, {DType::Int64});
  {
    KernelBuilder b(int_mean);
    b.store(1, {0}, b.reduce(ReduceKind::Mean, b.load(0, {1})));
  }
  EXPECT_FALSE(split_full_reduction(int_mean, 512, 64).has_value());
}

}  // namespace
}  // namespace kiln::kernel
