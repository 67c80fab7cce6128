// The CPU schedule: collapse_dims, choose_launch and vector_bits_for, with no LLVM involved.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/codegen/llvm/schedule.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {
namespace {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;
using kernel::ReduceKind;
using Strides = std::vector<int64_t>;

Kernel make_kernel(std::vector<int64_t> sizes, int reduce_rank, int inputs, int outputs) {
  Kernel k;
  k.name = "k";
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  for (int i = 0; i < inputs + outputs; ++i)
    k.buffers.push_back({"b" + std::to_string(i), DType::Float32, i >= inputs});
  return k;
}

// out = in, with `in` and `out` read and written through the given strides.
Kernel copy_kernel(std::vector<int64_t> sizes, Strides in, Strides out) {
  Kernel k = make_kernel(std::move(sizes), 0, 1, 1);
  KernelBuilder b(k);
  b.store(1, std::move(out), b.load(0, std::move(in)));
  return k;
}

// A kernel that sums the trailing `reduce_rank` dims of b0 (strides `in`) into b1 (strides `out`).
Kernel sum_kernel(std::vector<int64_t> sizes, int reduce_rank, Strides in, Strides out) {
  Kernel k = make_kernel(std::move(sizes), reduce_rank, 1, 1);
  KernelBuilder b(k);
  b.store(1, std::move(out), b.reduce(ReduceKind::Sum, b.load(0, std::move(in))));
  return k;
}

const Strides& load_strides(const Kernel& k) {
  return k.exprs.at(0).map.strides;
}
const Strides& store_strides(const Kernel& k) {
  return k.stores.at(0).map.strides;
}

// ---- collapse_dims -----------------------------------------------------------------------------

TEST(CollapseDimsTest, ContiguousDimsMergeIntoOne) {
  const Kernel c = collapse_dims(copy_kernel({2, 3, 4}, {12, 4, 1}, {12, 4, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{24}));
  EXPECT_EQ(load_strides(c), (Strides{1}));
  EXPECT_EQ(store_strides(c), (Strides{1}));
  EXPECT_EQ(c.reduce_rank, 0);
}

TEST(CollapseDimsTest, TransposedMapBlocksMerging) {
  // The store is contiguous but the load walks the transpose: nothing may merge.
  const Kernel c = collapse_dims(copy_kernel({3, 4}, {1, 3}, {4, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(load_strides(c), (Strides{1, 3}));
  EXPECT_EQ(store_strides(c), (Strides{4, 1}));
}

TEST(CollapseDimsTest, OnlyTheDimsEveryMapWalksAsOneMerge) {
  // [2, 3, 4]: the load is contiguous; in the store, dims 1 and 2 are one run (8 == 2 * 4) but
  // dim 0 is the innermost of its layout. Rows follow the store's memory order, so dim 0 goes
  // last, and the load cannot merge it with the others.
  const Kernel c = collapse_dims(copy_kernel({2, 3, 4}, {12, 4, 1}, {1, 8, 2}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{12, 2}));
  EXPECT_EQ(load_strides(c), (Strides{1, 12}));
  EXPECT_EQ(store_strides(c), (Strides{2, 1}));
}

TEST(CollapseDimsTest, AChannelsLastKernelIsOneRun) {
  // [N=2, C=4, H=3, W=5] in NHWC, read and written: walking C innermost is one contiguous run.
  const Strides nhwc = {60, 1, 20, 4};
  const Kernel c = collapse_dims(copy_kernel({2, 4, 3, 5}, nhwc, nhwc));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{120}));
  EXPECT_EQ(load_strides(c), (Strides{1}));
}

TEST(CollapseDimsTest, ReducedDimsKeepTheirOrder) {
  // The reduced dims are walked in the order of the sums, whatever the input's layout.
  const Kernel c = collapse_dims(sum_kernel({3, 4, 5}, 2, {1, 3, 12}, {1, 0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(load_strides(c), (Strides{1, 3, 12}));
}

TEST(CollapseDimsTest, AContiguousInputIsReadInAChannelsLastOutputsOrder) {
  // NCHW in, NHWC out: the output is written in runs; the input is read with stride H*W.
  const Kernel c = collapse_dims(copy_kernel({2, 4, 3, 5}, {60, 15, 5, 1}, {60, 1, 20, 4}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{2, 15, 4}));
  EXPECT_EQ(store_strides(c), (Strides{60, 4, 1}));
  EXPECT_EQ(load_strides(c), (Strides{60, 1, 15}));
}

TEST(CollapseDimsTest, BroadcastDimsMergeWhenEveryMapAgrees) {
  // Both dims broadcast in the load (stride 0) and are contiguous in the store.
  const Kernel c = collapse_dims(copy_kernel({5, 6}, {0, 0}, {6, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{30}));
  EXPECT_EQ(load_strides(c), (Strides{0}));
}

TEST(CollapseDimsTest, ARowBroadcastBlocksMerging) {
  // out[i][j] = row[j]: stride 0 on dim 0 but 1 on dim 1 is not one run.
  const Kernel c = collapse_dims(copy_kernel({5, 6}, {0, 1}, {6, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{5, 6}));
}

TEST(CollapseDimsTest, SizeOneDimsAreDropped) {
  // The transposed load keeps dims 1 and 3 apart, so only the size-1 dims go.
  const Kernel c = collapse_dims(copy_kernel({1, 5, 1, 6}, {30, 1, 7, 5}, {30, 6, 6, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(load_strides(c), (Strides{1, 5}));
  EXPECT_EQ(store_strides(c), (Strides{6, 1}));
}

TEST(CollapseDimsTest, OffsetsAreKept) {
  const Kernel c = [] {
    Kernel k = make_kernel({2, 3}, 0, 1, 1);
    KernelBuilder b(k);
    b.store(1, {3, 1}, b.load(0, {3, 1}, 5), 2);
    return collapse_dims(k);
  }();
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{6}));
  EXPECT_EQ(c.exprs[0].map.offset, 5);
  EXPECT_EQ(c.stores[0].map.offset, 2);
}

TEST(CollapseDimsTest, RowDimsNeverMergeWithReducedDims) {
  // Every map walks [4, 8] as one run (the store has stride 0 everywhere), yet the row dim and
  // the reduced dim stay apart.
  const Kernel c = collapse_dims(sum_kernel({4, 8}, 1, {8, 1}, {0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(c.reduce_rank, 1);
}

TEST(CollapseDimsTest, ReducedDimsMergeWithEachOtherAndRowDimsWithEachOther) {
  // [2, 3, 4, 5] reducing the last two dims, all contiguous: rows [6], elements [20].
  const Kernel c = collapse_dims(sum_kernel({2, 3, 4, 5}, 2, {60, 20, 5, 1}, {3, 1, 0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{6, 20}));
  EXPECT_EQ(c.reduce_rank, 1);
  EXPECT_EQ(load_strides(c), (Strides{20, 1}));
  EXPECT_EQ(store_strides(c), (Strides{1, 0}));
}

TEST(CollapseDimsTest, TransposedReducedDimsStayApart) {
  const Kernel c = collapse_dims(sum_kernel({3, 4, 5}, 2, {20, 1, 4}, {1, 0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(c.reduce_rank, 2);
}

TEST(CollapseDimsTest, ReducingKernelKeepsOneReducedDimOfSizeOne) {
  const Kernel c = collapse_dims(sum_kernel({4, 1}, 1, {1, 1}, {1, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(c.reduce_rank, 1);
}

TEST(CollapseDimsTest, ReducingKernelKeepsOneOfSeveralSizeOneReducedDims) {
  const Kernel c = collapse_dims(sum_kernel({4, 1, 1}, 2, {1, 1, 1}, {1, 0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(c.reduce_rank, 1);
}

TEST(CollapseDimsTest, FullReductionOfSizeOneDimsKeepsOneReducedDim) {
  const Kernel c = collapse_dims(sum_kernel({1, 1}, 2, {1, 1}, {0, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{1}));
  EXPECT_EQ(c.reduce_rank, 1);
  EXPECT_EQ(c.row_rank(), 0);
}

TEST(CollapseDimsTest, SizeOneRowDimsAreDroppedFromAReducingKernel) {
  const Kernel c = collapse_dims(sum_kernel({1, 8}, 1, {8, 1}, {1, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{8}));
  EXPECT_EQ(c.reduce_rank, 1);
  EXPECT_EQ(c.num_rows(), 1);
}

TEST(CollapseDimsTest, RankZeroBecomesOneDimOfSizeOne) {
  const Kernel c = collapse_dims(copy_kernel({}, {}, {}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{1}));
  EXPECT_EQ(load_strides(c), (Strides{0}));
  EXPECT_EQ(store_strides(c), (Strides{0}));
}

TEST(CollapseDimsTest, AllSizeOneDimsBecomeOneDimOfSizeOne) {
  const Kernel c = collapse_dims(copy_kernel({1, 1, 1}, {1, 1, 1}, {3, 2, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{1}));
  EXPECT_EQ(load_strides(c), (Strides{0}));
}

TEST(CollapseDimsTest, CollapsedKernelIsValidAndComputesTheSame) {
  // out[i][0][j][l] = a[l][j][i] + row[l] over [2, 1, 3, 4]: a size-1 dim and a transposed load.
  Kernel k = make_kernel({2, 1, 3, 4}, 0, 2, 1);
  KernelBuilder b(k);
  const int a = b.load(0, {1, 99, 2, 6});
  const int row = b.load(1, {0, 0, 0, 1});
  b.store(2, {12, 12, 4, 1}, b.binary(Op::Add, a, row, DType::Float32));
  const Kernel c = collapse_dims(k);
  kernel::validate(c);
  EXPECT_LT(c.rank(), k.rank());
  std::vector<float> in(24), r(4), want(24, -1), got(24, -1);
  for (int i = 0; i < 24; ++i)
    in[i] = static_cast<float>(i * 3 + 1);
  for (int i = 0; i < 4; ++i)
    r[i] = static_cast<float>(100 * i);
  kernel::interpret(k, {in.data(), r.data(), want.data()});
  kernel::interpret(c, {in.data(), r.data(), got.data()});
  EXPECT_EQ(got, want);
}

// ---- choose_launch -----------------------------------------------------------------------------

TEST(ChooseLaunchTest, ElementwiseSplitsAllElements) {
  const KernelLaunch launch = choose_launch(collapse_dims(copy_kernel({7, 300}, {300, 1}, {1, 7})));
  EXPECT_EQ(launch.range, 2100);
  EXPECT_EQ(launch.grain, kParallelGrainElements);
}

TEST(ChooseLaunchTest, TranscendentalsShrinkTheGrain) {
  // exp(x) per element (softmax-like work) splits into pieces 1 + kTranscendentalCost smaller.
  Kernel k = make_kernel({4096}, 0, 1, 1);
  KernelBuilder b(k);
  b.store(1, {1}, b.unary(Op::Exp, b.load(0, {1}), DType::Float32));
  EXPECT_EQ(element_cost(k), 1 + kTranscendentalCost);
  EXPECT_EQ(choose_launch(k).grain, kParallelGrainElements / (1 + kTranscendentalCost));
  // A row-level exp (once per row) costs nothing per element.
  Kernel r = make_kernel({64, 1024}, 1, 1, 1);
  KernelBuilder rb(r);
  const int sum = rb.reduce(ReduceKind::Sum, rb.load(0, {1024, 1}));
  rb.store(1, {1, 0}, rb.unary(Op::Exp, sum, DType::Float32));
  EXPECT_EQ(element_cost(r), 1);
}

TEST(ChooseLaunchTest, ElementwiseOfZeroSizeHasAnEmptyRange) {
  EXPECT_EQ(choose_launch(collapse_dims(copy_kernel({3, 0}, {0, 1}, {0, 1}))).range, 0);
}

TEST(ChooseLaunchTest, ReducingSplitsRows) {
  const KernelLaunch launch =
      choose_launch(collapse_dims(sum_kernel({6, 5, 10}, 1, {50, 10, 1}, {5, 1, 0})));
  EXPECT_EQ(launch.range, 30);
  EXPECT_GE(launch.grain, 1);
}

TEST(ChooseLaunchTest, ReducingGrainShrinksAsRowsGrow) {
  auto grain = [](int64_t row) {
    return choose_launch(sum_kernel({64, row}, 1, {row, 1}, {1, 0})).grain;
  };
  EXPECT_GT(grain(1), grain(100));
  EXPECT_GT(grain(100), grain(10000));
  EXPECT_GE(grain(10000), 1);
  // A row longer than the grain in elements is a piece by itself.
  EXPECT_EQ(grain(4 * kParallelGrainElements), 1);
}

TEST(ChooseLaunchTest, ReducingRowsOfZeroElementsStillHaveAGrain) {
  const KernelLaunch launch = choose_launch(sum_kernel({9, 0}, 1, {0, 1}, {1, 0}));
  EXPECT_EQ(launch.range, 9);
  EXPECT_GE(launch.grain, 1);
}

TEST(ChooseLaunchTest, FullReductionIsOneRow) {
  const KernelLaunch launch = choose_launch(collapse_dims(sum_kernel({1000}, 1, {1}, {0})));
  EXPECT_EQ(launch.range, 1);
  EXPECT_GE(launch.grain, 1);
}

// ---- vector_bits_for ---------------------------------------------------------------------------

TEST(VectorBitsForTest, Avx512Gives512) {
  EXPECT_EQ(vector_bits_for("+avx,+avx2,+avx512f,+sse4.2"), 512);
}

TEST(VectorBitsForTest, Avx2Gives256) {
  EXPECT_EQ(vector_bits_for("+avx,+avx2,-avx512f,+sse4.2"), 256);
}

TEST(VectorBitsForTest, AvxGives256) {
  EXPECT_EQ(vector_bits_for("+avx,-avx2,+sse4.2"), 256);
}

TEST(VectorBitsForTest, SseOnlyGives128) {
  EXPECT_EQ(vector_bits_for("+sse2,+sse4.2,-avx"), 128);
  EXPECT_EQ(vector_bits_for(""), 128);
}

TEST(VectorBitsForTest, AFeatureWhoseNameStartsLikeAvx512fIsNotAvx512f) {
  // "+avx512fp16" alone does not make "+avx512f".
  EXPECT_EQ(vector_bits_for("+avx2,+avx512fp16,-avx512f"), 256);
}

TEST(VectorBitsForTest, DisabledFeaturesDoNotCount) {
  EXPECT_EQ(vector_bits_for("-avx512f,-avx2,-avx"), 128);
}

}  // namespace
}  // namespace kiln::codegen
