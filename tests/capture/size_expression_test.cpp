#include "backend/capture/size_expression.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "kiln/error.h"

namespace kiln {
namespace {

using Op = SizeExpression::Op;
using Token = SizeExpression::Token;

// Value 0 has sizes [6, 7]; value 1 has sizes [-5] (no real size is negative, but the arithmetic
// must round as Python's does whatever the signs).
int64_t size_of(int64_t ref, int64_t dim) {
  return ref == 0 ? (dim == 0 ? 6 : 7) : -5;
}

int64_t evaluate(std::vector<Token> tokens) {
  return SizeExpression(std::move(tokens)).evaluate(size_of);
}

TEST(SizeExpression, ComputesProductsAndSumsOfSizes) {
  // 4 * s0 * s1 + 3
  EXPECT_EQ(evaluate({{Op::kConst, 4},
                      {Op::kDim, 0, 0},
                      {Op::kMul},
                      {Op::kDim, 0, 1},
                      {Op::kMul},
                      {Op::kConst, 3},
                      {Op::kAdd}}),
            4 * 6 * 7 + 3);
  EXPECT_EQ(evaluate({{Op::kDim, 0, 0}, {Op::kDim, 0, 1}, {Op::kMax}}), 7);
  EXPECT_EQ(evaluate({{Op::kDim, 0, 0}, {Op::kDim, 0, 1}, {Op::kMin}}), 6);
}

TEST(SizeExpression, DividesAndTakesRemaindersAsPythonDoes) {
  EXPECT_EQ(evaluate({{Op::kDim, 0, 1}, {Op::kConst, 2}, {Op::kFloorDiv}}), 3);
  EXPECT_EQ(evaluate({{Op::kDim, 0, 1}, {Op::kConst, 2}, {Op::kMod}}), 1);
  // Python: -5 // 2 == -3 and -5 % 2 == 1; 7 // -2 == -4 and 7 % -2 == -1 (C++: -2, -1, -3, 1).
  EXPECT_EQ(evaluate({{Op::kDim, 1, 0}, {Op::kConst, 2}, {Op::kFloorDiv}}), -3);
  EXPECT_EQ(evaluate({{Op::kDim, 1, 0}, {Op::kConst, 2}, {Op::kMod}}), 1);
  EXPECT_EQ(evaluate({{Op::kDim, 0, 1}, {Op::kConst, -2}, {Op::kFloorDiv}}), -4);
  EXPECT_EQ(evaluate({{Op::kDim, 0, 1}, {Op::kConst, -2}, {Op::kMod}}), -1);
}

TEST(SizeExpression, DivisionByZeroAndOverflowAreErrors) {
  EXPECT_THROW(evaluate({{Op::kDim, 0, 0}, {Op::kConst, 0}, {Op::kFloorDiv}}), Error);
  EXPECT_THROW(evaluate({{Op::kDim, 0, 0}, {Op::kConst, 0}, {Op::kMod}}), Error);
  const int64_t big = std::numeric_limits<int64_t>::max() / 4;
  EXPECT_THROW(evaluate({{Op::kConst, big}, {Op::kDim, 0, 0}, {Op::kMul}}), Error);
  EXPECT_THROW(
      evaluate({{Op::kConst, std::numeric_limits<int64_t>::max()}, {Op::kConst, 1}, {Op::kAdd}}),
      Error);
}

TEST(SizeExpression, AMalformedProgramIsRejectedWhenBuilt) {
  EXPECT_THROW(SizeExpression({}), Error);
  EXPECT_THROW(SizeExpression({{Op::kConst, 1}, {Op::kConst, 2}}), Error);  // two values left
  EXPECT_THROW(SizeExpression({{Op::kConst, 1}, {Op::kAdd}}), Error);       // pops nothing
  EXPECT_THROW(SizeExpression::op_named("pow"), Error);
  EXPECT_EQ(SizeExpression::op_named("floordiv"), Op::kFloorDiv);
}

}  // namespace
}  // namespace kiln
