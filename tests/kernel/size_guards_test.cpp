// Size guards (passes/kernel/size_guards.h): the extents a decision tests, recorded with their
// outcomes and checked against other kernels of the same structure.
#include "passes/kernel/size_guards.h"

#include <gtest/gtest.h>

#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

using testing::make_kernel;

// out[i, j] = x[i, j] + y[j] over [rows, n], x read at an offset: the accesses are x, y, out.
Kernel broadcast_add(int64_t rows, int64_t n, int64_t offset = 0) {
  Kernel k = make_kernel("k", {rows, n}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x = b.load(0, {n, 1});
  k.exprs[x].map.offset = offset;
  const int y = b.load(1, {0, 1});
  b.store(2, {n, 1}, b.binary(Op::Add, x, y, DType::Float32));
  return k;
}

TEST(SizeGuards, ExtentsOfAKernel) {
  const Kernel k = broadcast_add(6, 10, 3);
  EXPECT_EQ(extent_value(k, Extent::Elements), 60);
  EXPECT_EQ(extent_value(k, Extent::Dim, -1), 10);
  EXPECT_EQ(extent_value(k, Extent::Rows), 60);  // nothing reduced: every element is a row
  EXPECT_EQ(extent_value(k, Extent::Stride, 0, 0), 10);
  EXPECT_EQ(extent_value(k, Extent::Stride, 0, 1), 0);
  EXPECT_EQ(extent_value(k, Extent::Offset, 0, 0), 3);
  // x reaches 3 + 5 * 10 + 9.
  EXPECT_EQ(extent_value(k, Extent::Reach), 63);
  ASSERT_EQ(accesses(k).size(), 3u);
  EXPECT_EQ(accesses(k)[2], &k.stores[0].map);
}

TEST(SizeGuards, TestsAreRecordedWithTheirOutcomes) {
  const Kernel k = broadcast_add(6, 10);
  SizeGuards guards;
  EXPECT_TRUE(extent_at_least(k, Extent::Elements, 60, &guards));
  EXPECT_FALSE(extent_multiple_of(k, Extent::Dim, 4, &guards, -1));
  EXPECT_TRUE(extent_multiple_of(k, Extent::Stride, 5, &guards, 0, 0));
  record_range(k, Extent::Dim, 9, 11, &guards, 1);
  EXPECT_EQ(print_guards(guards), "elements>=60 dim[-1]%4!=0 stride#0[0]%5==0 dim[1]>=9 dim[1]<11");
  EXPECT_TRUE(guards_hold(guards, k));
  EXPECT_TRUE(guards_hold(guards, broadcast_add(7, 10)));
  EXPECT_FALSE(guards_hold(guards, broadcast_add(5, 10)));  // fewer elements
  EXPECT_FALSE(guards_hold(guards, broadcast_add(6, 12)));  // a multiple of 4, out of range
  // Not recorded without a list.
  EXPECT_TRUE(extent_at_least(k, Extent::Elements, 1, nullptr));
}

TEST(SizeGuards, AGuardOnADimOrAccessAKernelLacksFails) {
  const Kernel k = broadcast_add(6, 10);
  SizeGuards guards;
  extent_at_least(k, Extent::Dim, 1, &guards, 1);
  Kernel one_dim = make_kernel("k", {60}, 0, {DType::Float32}, {DType::Float32});
  {
    KernelBuilder b(one_dim);
    b.store(1, {1}, b.load(0, {1}));
  }
  EXPECT_FALSE(guards_hold(guards, one_dim));
  SizeGuards on_access;
  extent_at_least(k, Extent::Offset, 0, &on_access, 0, 2);  // the store, the third access
  EXPECT_TRUE(guards_hold(on_access, k));
  EXPECT_FALSE(guards_hold(on_access, one_dim));  // two accesses only
}

}  // namespace
}  // namespace kiln::kernel
