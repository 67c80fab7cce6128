// Which kernel outputs may be written over an input (kernel/in_place.h).
#include <gtest/gtest.h>

#include "passes/kernel/in_place.h"
#include "passes/kernel/printer.h"

namespace kiln::kernel {
namespace {

using Pairs = std::vector<std::pair<int, int>>;

// out b2 = b0 + b1 over [4, 8], where b1 is read through `b1_strides`.
Kernel add_kernel(std::vector<int64_t> b1_strides, DType out_dtype = DType::Float32) {
  Kernel k;
  k.name = "k";
  k.sizes = {4, 8};
  k.buffers = {
      {"b0", DType::Float32, false}, {"b1", DType::Float32, false}, {"b2", out_dtype, true}};
  KernelBuilder b(k);
  const int x = b.load(0, {8, 1});
  const int y = b.load(1, std::move(b1_strides));
  int sum = b.binary(Op::Add, x, y, DType::Float32);
  sum = b.cast(sum, out_dtype);
  b.store(2, {8, 1}, sum);
  return k;
}

TEST(InPlace, InputsReadWhereTheOutputIsWrittenQualify) {
  EXPECT_EQ(in_place_candidates(add_kernel({8, 1})), (Pairs{{0, 2}, {1, 2}}));
}

TEST(InPlace, BroadcastInputDoesNot) {
  // b1 is a row vector: element j is read by every row, so writing row 0 would change row 1.
  EXPECT_EQ(in_place_candidates(add_kernel({0, 1})), (Pairs{{0, 2}}));
}

TEST(InPlace, TransposedReadDoesNot) {
  Kernel k = add_kernel({8, 1});
  k.sizes = {8, 8};
  k.exprs[1].map.strides = {1, 8};  // b1 read transposed
  k.exprs[0].map.strides = k.stores[0].map.strides = {8, 1};
  EXPECT_EQ(in_place_candidates(k), (Pairs{{0, 2}}));
}

TEST(InPlace, InputReadTwiceThroughDifferentMapsDoesNot) {
  Kernel k = add_kernel({8, 1});
  k.exprs[1].map.buffer = 0;  // b0 read at [i, j] and, with an offset, at [i, j + 1]
  k.exprs[1].map.offset = 1;
  EXPECT_EQ(in_place_candidates(k), Pairs{});
}

TEST(InPlace, ElementSizeMustMatch) {
  EXPECT_EQ(in_place_candidates(add_kernel({8, 1}, DType::Float64)), Pairs{});
  EXPECT_EQ(in_place_candidates(add_kernel({8, 1}, DType::Int32)), (Pairs{{0, 2}, {1, 2}}));
}

TEST(InPlace, ReductionsNeverWriteInPlace) {
  Kernel k;
  k.name = "k";
  k.sizes = {4, 8};
  k.reduce_rank = 1;
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  const int x = b.load(0, {8, 1});
  const int max = b.reduce(ReduceKind::Max, x);
  b.store(1, {8, 1}, b.binary(Op::Sub, x, max, DType::Float32));
  EXPECT_EQ(in_place_candidates(k), Pairs{});
}

TEST(InPlace, PrinterShowsTheSharedBuffer) {
  Kernel k = add_kernel({8, 1});
  k.in_place = {{1, 2}};
  EXPECT_NE(print_kernel(k).find("out b2: f32 in place of b1\n"), std::string::npos)
      << print_kernel(k);
}

}  // namespace
}  // namespace kiln::kernel
