// The CUDA schedule's size guards: every test of an extent it makes is recorded, so a schedule
// holds for every size its guards admit (the same property the CPU schedule's test checks).
#include <gtest/gtest.h>

#include <random>

#include "backend/codegen/cuda/cuda_schedule.h"
#include "cuda/test_kernels.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/printer.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::Kernel;
using namespace cuda_test::kernels;

// out = x + y over [a, b], y broadcast along dim 0: after collapsing, two dims whose strides
// (b for x and out) decide the 16-byte path.
Kernel broadcast_add(int64_t a, int64_t b) {
  Kernel k = make_kernel("k", {a, b}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder builder(k);
  const int x = builder.load(0, {b, 1});
  const int y = builder.load(1, {0, 1});
  builder.store(2, {b, 1}, builder.binary(Op::Add, x, y, DType::Float32));
  return k;
}

// Families whose structure does not depend on their sizes: a schedule's decisions for one
// member may differ from another's only through the extents it tested.
Kernel family_member(int family, int64_t a, int64_t b) {
  switch (family) {
    case 0:
      return broadcast_add(a, b);
    case 1:
      return softmax(a, b);
    case 2:
      return row_sum(a, b);
    case 3:
      return column_sum(a, b);
    default:
      return layer_norm(a, b);
  }
}

// Sizes on both sides of the thresholds the schedule tests (warp multiples, a whole block, the
// cached rows, the split, the across-rows rows) and odd ones (vector widths).
int64_t random_size(std::mt19937_64& rng) {
  static const int64_t kNear[] = {32,
                                  224,
                                  225,
                                  256,
                                  2048,
                                  kAcrossRowsMinRows,
                                  kSplitMaxRows,
                                  kSplitRowElements,
                                  kSplitRowElements + 1,
                                  5 * kSplitSliceElements};
  if (rng() % 3 == 0) return kNear[rng() % std::size(kNear)] + static_cast<int64_t>(rng() % 3) - 1;
  return int64_t{2} << (rng() % 18);
}

CudaSchedule decisions(CudaSchedule s) {
  s.blocks = 0;
  s.workspace_bytes = 0;
  s.guards.clear();
  return s;
}

TEST(CudaSchedule, AScheduleHoldsForEverySizeItsGuardsAdmit) {
  std::mt19937_64 rng(11);
  int admitted = 0, rejected = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const int family = static_cast<int>(rng() % 5);
    const Kernel first =
        kernel::collapse_dims(family_member(family, random_size(rng), random_size(rng)));
    const Kernel second =
        kernel::collapse_dims(family_member(family, random_size(rng), random_size(rng)));
    // Collapsing may merge dims for some sizes only: that is a different structure.
    if (first.rank() != second.rank()) continue;
    const CudaSchedule s1 = choose_cuda_schedule(first);
    ASSERT_TRUE(kernel::guards_hold(s1.guards, first)) << kernel::print_guards(s1.guards);
    if (!kernel::guards_hold(s1.guards, second)) {
      ++rejected;
      continue;
    }
    ++admitted;
    const CudaSchedule s2 = choose_cuda_schedule(second);
    ASSERT_EQ(decisions(s1), decisions(s2))
        << "family " << family << ": " << kernel::print_kernel(first) << " and "
        << kernel::print_kernel(second) << " under guards " << kernel::print_guards(s1.guards);
  }
  EXPECT_GT(admitted, 500);
  EXPECT_GT(rejected, 500);
}

TEST(CudaSchedule, GuardsNameTheTestsMade) {
  // [64, 1000] + [1000]: the 16-byte path needs the row (and x's stride) to be a multiple of 4.
  const Kernel even = kernel::collapse_dims(broadcast_add(64, 1000));
  const CudaSchedule s = choose_cuda_schedule(even);
  EXPECT_EQ(s.vector, 4);
  const std::string text = kernel::print_guards(s.guards);
  EXPECT_NE(text.find("dim[1]%4==0"), std::string::npos) << text;
  EXPECT_NE(text.find("stride#0[0]%4==0"), std::string::npos) << text;
  EXPECT_NE(text.find("reach<1073741824"), std::string::npos) << text;
  const Kernel odd = kernel::collapse_dims(broadcast_add(64, 1001));
  EXPECT_FALSE(kernel::guards_hold(s.guards, odd));
  EXPECT_EQ(choose_cuda_schedule(odd).vector, 1);
  // A split softmax: the row's length picks the slices, a range the guards pin.
  const Kernel split = kernel::collapse_dims(softmax(2, 5 * kSplitSliceElements));
  const CudaSchedule t = choose_cuda_schedule(split);
  EXPECT_EQ(t.slices, 5);
  EXPECT_NE(kernel::print_guards(t.guards).find("rows<64"), std::string::npos);
  EXPECT_TRUE(kernel::guards_hold(t.guards, kernel::collapse_dims(softmax(3, 5 * 16384 - 7))));
  EXPECT_FALSE(kernel::guards_hold(t.guards, kernel::collapse_dims(softmax(2, 6 * 16384))));
}

}  // namespace
}  // namespace kiln::codegen::cuda
