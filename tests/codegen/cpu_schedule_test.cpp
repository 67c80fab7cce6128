// The CPU schedule (backend/codegen/llvm/cpu_schedule.h): every decision the emitters follow,
// taken from the kernel and the host before any IR exists, and the kernel cache's key that
// follows from it.
#include "backend/codegen/llvm/cpu_schedule.h"

#include <random>

#include "backend/codegen/llvm/kernel_emitter.h"
#include "backend/codegen/llvm/store_policy.h"
#include "tests/codegen/codegen_harness.h"

namespace kiln::codegen {
namespace codegen_test {
namespace {

using Strategy = CpuSchedule::Strategy;

constexpr CpuTarget kAvx512{512, kStreamBytes, true};

Kernel scaled_copy(std::vector<int64_t> sizes) {
  Kernel k = make_kernel("scale", sizes, 0, {F32}, {F32});
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * sizes[d + 1];
  KernelBuilder b(k);
  b.store(1, strides, b.binary(Op::Mul, b.load(0, strides), b.constant(2, F32), F32));
  return kernel::collapse_dims(k);
}

Kernel softmax(int64_t rows, int64_t n) {
  return kiln::testing::softmax_kernel(rows, n);
}

TEST(CpuScheduleTest, ALargeContiguousOutputStreamsASmallOneDoesNot) {
  const CpuSchedule large = schedule_cpu_kernel(scaled_copy({4 << 20}), kAvx512);
  const CpuSchedule small = schedule_cpu_kernel(scaled_copy({4096}), kAvx512);
  EXPECT_EQ(large.strategy, Strategy::Elementwise);
  EXPECT_TRUE(large.streaming_stores);
  EXPECT_FALSE(small.streaming_stores);
  // Four-lane vectors are too narrow for aligned streaming stores.
  EXPECT_FALSE(
      schedule_cpu_kernel(scaled_copy({4 << 20}), {128, kStreamBytes, true}).streaming_stores);
  EXPECT_EQ(large.launch.range, 4 << 20);
}

TEST(CpuScheduleTest, ASoftmaxPassesTwiceCachesItsExpAndPrefetchesLargeRows) {
  const Kernel large = softmax(1024, 4096);  // 16 MB: more than the caches keep
  const CpuSchedule s = schedule_cpu_kernel(large, kAvx512);
  EXPECT_EQ(s.strategy, Strategy::AlongRows);
  ASSERT_EQ(s.row_passes.size(), 2u);                   // the max, then the sum
  EXPECT_EQ(s.prefetched_maps, (std::vector<int>{0}));  // x, read again in the second pass
  // exp(x - max) is computed in the sum's pass and read again by the stores.
  ASSERT_EQ(s.row_caches.size(), 1u);
  EXPECT_EQ(large.exprs[s.row_caches[0].expr].op, Op::Exp);
  EXPECT_EQ(s.row_caches[0].first_pass, 1);
  EXPECT_TRUE(schedule_cpu_kernel(softmax(4, 4096), kAvx512).prefetched_maps.empty());
  // Rows too long for a stack scratch cache nothing.
  EXPECT_TRUE(schedule_cpu_kernel(softmax(4, kMaxCachedRow + 1), kAvx512).row_caches.empty());
}

TEST(CpuScheduleTest, ASumOfExpsUnrollsLessWithSixteenRegisters) {
  constexpr CpuTarget kAvx2{256, kStreamBytes, true};
  EXPECT_EQ(schedule_cpu_kernel(softmax(64, 1024), kAvx2).reduce_unroll, 2);
  EXPECT_EQ(schedule_cpu_kernel(softmax(64, 1024), kAvx512).reduce_unroll, 4);
  Kernel sum = make_kernel("sum", {64, 1024}, 1, {F32}, {F32});
  {
    KernelBuilder b(sum);
    b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {1024, 1})));
  }
  EXPECT_EQ(schedule_cpu_kernel(sum, kAvx2).reduce_unroll, 4);
}

TEST(CpuScheduleTest, LongRowsAreSummedInChunksAndColumnSumsGoAcrossRows) {
  Kernel row = make_kernel("sum", {2, kSumChunk + 1}, 1, {F32}, {F32});
  {
    KernelBuilder b(row);
    b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {kSumChunk + 1, 1})));
  }
  EXPECT_EQ(schedule_cpu_kernel(row, kAvx512).sum_chunk, kSumChunk);
  EXPECT_EQ(schedule_cpu_kernel(softmax(2, 64), kAvx512).sum_chunk, 0);
  // x.sum(0) on a row-major [64, 256] x: each vector holds 16 neighbouring columns.
  Kernel columns = make_kernel("colsum", {256, 64}, 1, {F32}, {F32});
  {
    KernelBuilder b(columns);
    b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {1, 256})));
  }
  EXPECT_EQ(schedule_cpu_kernel(columns, kAvx512).strategy, Strategy::AcrossRows);
}

TEST(CpuScheduleTest, TheCacheKeyDropsTheOutermostSizeOnlyWhereTheScheduleCarriesIt) {
  // A layer-norm-like row kernel over any number of rows: one code (one key, one schedule).
  const Kernel a = softmax(3, 768), b = softmax(17, 768);
  const CpuSchedule sa = schedule_cpu_kernel(a, kAvx512), sb = schedule_cpu_kernel(b, kAvx512);
  EXPECT_EQ(schedule_key(sa), schedule_key(sb));
  EXPECT_TRUE(kernel::same_computation(code_key(a, sa), code_key(b, sb)));
  EXPECT_NE(sa.launch.range, sb.launch.range);
  // Past the prefetch threshold the schedule differs, and so does the key.
  const CpuSchedule large = schedule_cpu_kernel(softmax(8192, 768), kAvx512);
  EXPECT_NE(schedule_key(sa), schedule_key(large));
  // A one-dim kernel whose only dim is reduced keeps its size.
  Kernel whole = make_kernel("total", {1000}, 1, {F32}, {F32});
  {
    KernelBuilder builder(whole);
    builder.store(1, {0}, builder.reduce(ReduceKind::Sum, builder.load(0, {1})));
  }
  EXPECT_EQ(code_key(whole, schedule_cpu_kernel(whole, kAvx512)).sizes[0], 1000);
}

// ---- Size guards: a schedule holds for every size its guards admit ---------------------------

// Kernel families whose structure does not depend on their sizes (all >= 2): a schedule's
// decisions for one member may differ from another's only through the sizes it compared.
Kernel family_member(int family, int64_t a, int64_t b) {
  switch (family) {
    case 0:
      return scaled_copy({a, b});
    case 1:
      return softmax(a, b);
    case 2:
      return reduce_kernel(ReduceKind::Sum, F32, a, b);
    case 3: {  // column sums: rows are neighbours in memory
      Kernel k = make_kernel("colsum", {a, b}, 1, {F32}, {F32});
      KernelBuilder builder(k);
      builder.store(1, {1, 0}, builder.reduce(ReduceKind::Sum, builder.load(0, {1, a})));
      return k;
    }
    default: {  // a transposing copy, NCHW <-> NHWC-like
      Kernel k = make_kernel("transpose", {a, b}, 0, {F32}, {F32});
      KernelBuilder builder(k);
      builder.store(1, {b, 1}, builder.load(0, {1, a}));
      return kernel::collapse_dims(k);
    }
  }
}

// Sizes on both sides of every threshold a schedule compares (vector widths, transpose tiles,
// cached rows, sum chunks, the streaming threshold) and far from them.
int64_t random_size(std::mt19937_64& rng) {
  static const int64_t kNear[] = {
      16, 17, kMaxCachedRow, kMaxCachedRow + 1, kSumChunk, kSumChunk + 1, 2048, 4096};
  if (rng() % 3 == 0) return kNear[rng() % std::size(kNear)] + static_cast<int64_t>(rng() % 3) - 1;
  return int64_t{2} << (rng() % 17);  // 2 .. 128K
}

CpuSchedule decisions(CpuSchedule s) {
  s.launch = {};
  s.guards.clear();
  return s;
}

TEST(CpuScheduleTest, AScheduleHoldsForEverySizeItsGuardsAdmit) {
  std::mt19937_64 rng(7);
  int admitted = 0, rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int family = static_cast<int>(rng() % 5);
    const Kernel first = family_member(family, random_size(rng), random_size(rng));
    const Kernel second = family_member(family, random_size(rng), random_size(rng));
    for (const CpuTarget& target : {kAvx512, CpuTarget{256, kStreamBytes, false}}) {
      const CpuSchedule s1 = schedule_cpu_kernel(first, target);
      ASSERT_TRUE(kernel::guards_hold(s1.guards, first)) << kernel::print_guards(s1.guards);
      if (!kernel::guards_hold(s1.guards, second)) {
        ++rejected;
        continue;
      }
      ++admitted;
      const CpuSchedule s2 = schedule_cpu_kernel(second, target);
      ASSERT_EQ(decisions(s1), decisions(s2))
          << "family " << family << ": " << kernel::print_kernel(first) << " and "
          << kernel::print_kernel(second) << " under guards " << kernel::print_guards(s1.guards)
          << " got schedules " << schedule_key(s1) << " and " << schedule_key(s2);
    }
  }
  // Both outcomes occur often, so the property is exercised on each side.
  EXPECT_GT(admitted, 1000);
  EXPECT_GT(rejected, 1000);
}

TEST(CpuScheduleTest, GuardsNameTheComparisonsMade) {
  // A softmax over long rows: its moments, row cache and sum chunk compare the row, prefetch and
  // streaming the elements.
  const Kernel k = softmax(4, kMaxCachedRow + 1);
  const CpuSchedule s = schedule_cpu_kernel(k, kAvx512);
  EXPECT_TRUE(s.row_caches.empty());
  const std::string text = kernel::print_guards(s.guards);
  EXPECT_NE(text.find("row>=" + std::to_string(kMaxCachedRow + 1)), std::string::npos) << text;
  EXPECT_NE(text.find("dim[-1]<" + std::to_string(kSumChunk + 1)), std::string::npos) << text;
  // The same structure with shorter rows fails the row guard: its schedule caches.
  EXPECT_FALSE(kernel::guards_hold(s.guards, softmax(4, 64)));
  EXPECT_FALSE(schedule_cpu_kernel(softmax(4, 64), kAvx512).row_caches.empty());
}

}  // namespace
}  // namespace codegen_test
}  // namespace kiln::codegen
