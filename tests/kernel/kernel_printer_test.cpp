#include <string>

#include <gtest/gtest.h>

#include "passes/kernel/kernel.h"
#include "passes/kernel/printer.h"
#include "tests/support/check_pattern.h"

namespace kiln::kernel {
namespace {

Kernel make_kernel(std::string name, std::vector<int64_t> sizes, int reduce_rank,
                   std::vector<Buffer> buffers) {
  Kernel k;
  k.name = std::move(name);
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  k.buffers = std::move(buffers);
  return k;
}

// ---- The kernel printer ------------------------------------------------------------------------

TEST(KernelPrinterTest, ElementwiseKernel) {
  Kernel k = make_kernel(
      "add_relu", {4, 8}, 0,
      {{"b0", DType::Float32, false}, {"b1", DType::Float32, false}, {"b2", DType::Float32, true}});
  KernelBuilder b(k);
  const int x = b.load(0, {8, 1});
  const int y = b.load(1, {8, 1});
  const int sum = b.binary(Op::Add, x, y, DType::Float32);
  const int relu = b.binary(Op::Max, sum, b.constant(0, DType::Float32), DType::Float32);
  b.store(2, {8, 1}, relu);
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: kernel add_relu [4, 8]
    CHECK-NOT: reduce
    CHECK: in  b0: f32
    CHECK: in  b1: f32
    CHECK: out b2: f32
    CHECK: %0 = load b0[8, 1] : f32
    CHECK: %1 = load b1[8, 1] : f32
    CHECK: %2 = add %0, %1 : f32
    CHECK: %3 = const 0 : f32
    CHECK: %4 = max %2, %3 : f32
    CHECK: store b2[8, 1] = %4
  )"));
}

TEST(KernelPrinterTest, HeaderShowsReduceRank) {
  Kernel k = make_kernel("rowsum", {4, 8}, 1,
                         {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}});
  KernelBuilder b(k);
  const int sum = b.reduce(ReduceKind::Sum, b.load(0, {8, 1}));
  b.store(1, {1, 0}, sum);
  EXPECT_TRUE(matches_checks(print_kernel(k), "CHECK: kernel rowsum [4, 8] reduce 1\n"));
}

TEST(KernelPrinterTest, ReduceShowsItsKind) {
  Kernel k = make_kernel("softmax_0", {4, 8}, 1,
                         {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}});
  KernelBuilder b(k);
  const int x = b.load(0, {8, 1});
  const int max = b.reduce(ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, max, DType::Float32), DType::Float32);
  const int sum = b.reduce(ReduceKind::Sum, e);
  b.store(1, {8, 1}, b.binary(Op::Div, e, sum, DType::Float32));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: %1 = reduce.max %0 : f32
    CHECK: %2 = sub %0, %1 : f32
    CHECK: %3 = exp %2 : f32
    CHECK: %4 = reduce.sum %3 : f32
    CHECK: %5 = div %3, %4 : f32
    CHECK: store b1[8, 1] = %5
  )"));
}

TEST(KernelPrinterTest, MeanAndMinReduceNames) {
  Kernel k = make_kernel(
      "stats", {2, 3}, 1,
      {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}, {"b2", DType::Float32, true}});
  KernelBuilder b(k);
  const int x = b.load(0, {3, 1});
  b.store(1, {1, 0}, b.reduce(ReduceKind::Mean, x));
  b.store(2, {1, 0}, b.reduce(ReduceKind::Min, x));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: reduce.mean %0
    CHECK: reduce.min %0
  )"));
}

TEST(KernelPrinterTest, BroadcastLoadHasZeroStrides) {
  // A [4,1] column and an [8] row against a [4,8] iteration space.
  Kernel k = make_kernel(
      "bcast", {4, 8}, 0,
      {{"b0", DType::Float32, false}, {"b1", DType::Float32, false}, {"b2", DType::Float32, true}});
  KernelBuilder b(k);
  const int col = b.load(0, {1, 0});
  const int row = b.load(1, {0, 1});
  b.store(2, {8, 1}, b.binary(Op::Mul, col, row, DType::Float32));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: load b0[1, 0] : f32
    CHECK: load b1[0, 1] : f32
    CHECK: store b2[8, 1] = %2
  )"));
}

TEST(KernelPrinterTest, NonZeroOffsetIsPrinted) {
  Kernel k =
      make_kernel("offset", {4}, 0, {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}});
  KernelBuilder b(k);
  b.store(1, {2}, b.load(0, {1}, 3), 1);
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: load b0[1]+3 : f32
    CHECK: store b1[2]+1 = %0
  )"));
}

TEST(KernelPrinterTest, ZeroOffsetIsNotPrinted) {
  Kernel k = make_kernel("no_offset", {4}, 0,
                         {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}});
  KernelBuilder b(k);
  b.store(1, {1}, b.load(0, {1}));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: load b0[1] : f32
    CHECK-NOT: +
    CHECK: store b1[1] = %0
  )"));
}

TEST(KernelPrinterTest, CastsAndComparisonsShowTheirDtypes) {
  Kernel k = make_kernel(
      "cmp", {4}, 0,
      {{"b0", DType::Int32, false}, {"b1", DType::Bool, true}, {"b2", DType::Float16, true}});
  KernelBuilder b(k);
  const int x = b.cast(b.load(0, {1}), DType::Float32);
  const int lt = b.binary(Op::Lt, x, b.constant(2.5, DType::Float32), DType::Float32);
  b.store(1, {1}, lt);
  b.store(2, {1}, x);
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: in  b0: i32
    CHECK: out b1: b8
    CHECK: out b2: f16
    CHECK: %0 = load b0[1] : i32
    CHECK: %1 = cast %0 : f32
    CHECK: %2 = const 2.5 : f32
    CHECK: %3 = lt %1, %2 : b8
    CHECK: store b1[1] = %3
    CHECK: store b2[1] = %1
  )"));
}

TEST(KernelPrinterTest, WhereListsItsThreeArguments) {
  Kernel k = make_kernel("select", {4}, 0,
                         {{"b0", DType::Bool, false},
                          {"b1", DType::Float32, false},
                          {"b2", DType::Float32, false},
                          {"b3", DType::Float32, true}});
  KernelBuilder b(k);
  const int c = b.load(0, {1});
  const int t = b.load(1, {1});
  const int e = b.load(2, {0});
  b.store(3, {1}, b.where(c, t, e, DType::Float32));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: %2 = load b2[0] : f32
    CHECK: %3 = where %0, %1, %2 : f32
  )"));
}

TEST(KernelBuilderTest, CastToTheSameDtypeAddsNothing) {
  Kernel k =
      make_kernel("nop", {4}, 0, {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  EXPECT_EQ(b.cast(x, DType::Float32), x);
  EXPECT_EQ(k.exprs.size(), 1u);
}

TEST(KernelBuilderTest, ComparisonIsBoolWhateverTheRequestedDtype) {
  Kernel k = make_kernel("cmp", {4}, 0, {{"b0", DType::Float32, false}});
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  EXPECT_EQ(b.dtype(b.binary(Op::Gt, x, x, DType::Float32)), DType::Bool);
}

TEST(KernelTest, RowsAndRowSizeSplitAtTheReducedDims) {
  Kernel k = make_kernel("k", {2, 3, 4, 5}, 2, {});
  EXPECT_EQ(k.row_rank(), 2);
  EXPECT_EQ(k.num_rows(), 6);
  EXPECT_EQ(k.row_size(), 20);
}

TEST(KernelTest, LoadWithStrideZeroOnReducedDimsIsRowLevel) {
  Kernel k = make_kernel(
      "levels", {4, 8}, 1,
      {{"b0", DType::Float32, false}, {"b1", DType::Float32, false}, {"b2", DType::Float32, true}});
  KernelBuilder b(k);
  const int x = b.load(0, {8, 1});
  const int bias = b.load(1, {1, 0});
  const int sum = b.reduce(ReduceKind::Sum, x);
  const int out = b.binary(Op::Add, sum, bias, DType::Float32);
  b.store(2, {1, 0}, out);
  const std::vector<bool> element = element_levels(k);
  EXPECT_TRUE(element[x]);
  EXPECT_FALSE(element[bias]);
  EXPECT_FALSE(element[sum]);
  EXPECT_FALSE(element[out]);
}

// ---- The pattern helper itself -----------------------------------------------------------------

TEST(CheckPatternTest, AcceptsSubstringsInOrder) {
  EXPECT_TRUE(matches_checks("alpha beta gamma", "CHECK: alpha\nCHECK: gamma\n"));
}

TEST(CheckPatternTest, RejectsSubstringsOutOfOrder) {
  EXPECT_FALSE(matches_checks("alpha beta gamma", "CHECK: gamma\nCHECK: alpha\n"));
}

TEST(CheckPatternTest, RejectsAMissingSubstring) {
  const auto result = matches_checks("alpha beta", "CHECK: delta\n");
  EXPECT_FALSE(result);
  // The message shows the failing pattern and the text.
  EXPECT_NE(std::string(result.message()).find("delta"), std::string::npos);
  EXPECT_NE(std::string(result.message()).find("alpha beta"), std::string::npos);
}

TEST(CheckPatternTest, CheckNotFailsWhenTheSubstringIsBetweenMatches) {
  EXPECT_FALSE(matches_checks("a x b", "CHECK: a\nCHECK-NOT: x\nCHECK: b\n"));
}

TEST(CheckPatternTest, CheckNotIgnoresTextOutsideItsRange) {
  EXPECT_TRUE(matches_checks("x a b x", "CHECK: a\nCHECK-NOT: x\nCHECK: b\n"));
}

TEST(CheckPatternTest, TrailingCheckNotCoversTheRestOfTheText) {
  EXPECT_FALSE(matches_checks("a b x", "CHECK: a\nCHECK-NOT: x\n"));
  EXPECT_TRUE(matches_checks("x a b", "CHECK: a\nCHECK-NOT: x\n"));
}

TEST(CheckPatternTest, LeadingCheckNotCoversTheStartOfTheText) {
  EXPECT_FALSE(matches_checks("x a", "CHECK-NOT: x\nCHECK: a\n"));
}

TEST(CheckPatternTest, AMatchIsNotReusedByTheNextCheck) {
  EXPECT_FALSE(matches_checks("one", "CHECK: one\nCHECK: one\n"));
  EXPECT_TRUE(matches_checks("one one", "CHECK: one\nCHECK: one\n"));
}

TEST(CheckPatternTest, RejectsAnUnknownDirective) {
  EXPECT_FALSE(matches_checks("abc", "CHECK-NEXT: abc\n"));
}

TEST(CheckPatternTest, RejectsPatternsWithoutChecks) {
  EXPECT_FALSE(matches_checks("abc", "\n  \n"));
}

}  // namespace
}  // namespace kiln::kernel
