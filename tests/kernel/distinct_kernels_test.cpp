// same_computation and distinct_kernels: a plan's repeated kernels (the same layer twice) are
// recognized whatever their names, and nothing that changes the computation is overlooked.
#include <gtest/gtest.h>

#include "passes/kernel/kernel.h"
#include "tests/support/kernel_maker.h"

namespace kiln::kernel {
namespace {

using testing::make_kernel;

// out = a * scale + b over [4, 8] (b broadcast along rows).
Kernel scale_add(const std::string& name, double scale = 2.0) {
  Kernel k = make_kernel(name, {4, 8}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int a = b.load(0, {8, 1});
  const int scaled = b.binary(Op::Mul, a, b.constant(scale, DType::Float32), DType::Float32);
  b.store(2, {8, 1}, b.binary(Op::Add, scaled, b.load(1, {0, 1}), DType::Float32));
  return k;
}

TEST(DistinctKernels, TheSameComputationUnderAnotherNameIsOne) {
  EXPECT_TRUE(same_computation(scale_add("layer0_add"), scale_add("layer1_add")));
  const DistinctKernels distinct =
      distinct_kernels({scale_add("l0"), scale_add("other", 3.0), scale_add("l1")});
  ASSERT_EQ(distinct.kernels.size(), 2u);
  EXPECT_EQ(distinct.index, (std::vector<size_t>{0, 1, 0}));
  EXPECT_EQ(distinct.kernels[0].name, "l0");
}

TEST(DistinctKernels, AnyDifferenceInTheComputationKeepsThemApart) {
  const Kernel base = scale_add("k");
  std::vector<Kernel> variants(6, base);
  variants[0].sizes = {4, 9};
  variants[1].exprs[0].map.strides = {9, 1};  // the load of a
  variants[2].exprs[1].constant = 2.5;
  variants[3].stores[0].map.offset = 1;
  variants[4].buffers[1].dtype = DType::Float16;
  variants[5].in_place = {{0, 2}};
  for (size_t i = 0; i < variants.size(); ++i)
    EXPECT_FALSE(same_computation(base, variants[i])) << "variant " << i;
  // Constants compare bit for bit: x * 0.0 and x * -0.0 differ in the sign of zero.
  EXPECT_FALSE(same_computation(scale_add("k", 0.0), scale_add("k", -0.0)));
}

}  // namespace
}  // namespace kiln::kernel
