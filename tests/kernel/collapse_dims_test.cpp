// Fewer, longer dimensions for the code generators (kernel/collapse_dims.h).
#include <gtest/gtest.h>

#include "passes/kernel/collapse_dims.h"

namespace kiln::kernel {
namespace {

// out b1 = b0 over `sizes`, read and written through the given strides.
Kernel copy_kernel(std::vector<int64_t> sizes, std::vector<int64_t> in_strides,
                   std::vector<int64_t> out_strides) {
  Kernel k;
  k.name = "k";
  k.sizes = std::move(sizes);
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  b.store(1, std::move(out_strides), b.load(0, std::move(in_strides)));
  return k;
}

TEST(CollapseDims, ContiguousDimsMergeIntoOne) {
  const Kernel c = collapse_dims(copy_kernel({2, 3, 4}, {12, 4, 1}, {12, 4, 1}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{24}));
  EXPECT_EQ(c.stores[0].map.strides, (std::vector<int64_t>{1}));
}

TEST(CollapseDims, AChannelsLastOutputIsWalkedChannelInnermost) {
  // [N=2, C=4, H=3, W=5]: NHWC strides for both buffers. Walking C innermost makes the whole
  // tensor one contiguous run.
  const std::vector<int64_t> nhwc = {60, 1, 20, 4};
  const Kernel c = collapse_dims(copy_kernel({2, 4, 3, 5}, nhwc, nhwc));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{120}));
  EXPECT_EQ(c.exprs[0].map.strides, (std::vector<int64_t>{1}));
}

TEST(CollapseDims, AContiguousInputIsReadInTheOutputsOrder) {
  // NCHW in, NHWC out: the output is written in runs; the input is read with stride H*W.
  const Kernel c = collapse_dims(copy_kernel({2, 4, 3, 5}, {60, 15, 5, 1}, {60, 1, 20, 4}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{2, 15, 4}));
  EXPECT_EQ(c.stores[0].map.strides, (std::vector<int64_t>{60, 4, 1}));
  EXPECT_EQ(c.exprs[0].map.strides, (std::vector<int64_t>{60, 1, 15}));
}

TEST(CollapseDims, ReducedDimsKeepTheirOrder) {
  Kernel k;
  k.name = "k";
  k.sizes = {3, 4, 5};
  k.reduce_rank = 2;
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  b.store(1, {1, 0, 0}, b.reduce(ReduceKind::Sum, b.load(0, {1, 3, 12})));
  const Kernel c = collapse_dims(k);
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(c.exprs[0].map.strides, (std::vector<int64_t>{1, 3, 12}));
}

}  // namespace
}  // namespace kiln::kernel
