// var and std, lowered to the kernel IR (passes/kernel/lower_ops.cpp: Lowering::variance) and
// run through the reference interpreter, against a float64 computation by hand.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/lower_group.h"
#include "passes/kernel/lower_ops.h"
#include "tests/support/can_lower.h"

namespace kiln::kernel {
namespace {

// A [3, 5] float32 input with an offset far larger than its spread, as activations often have.
std::vector<float> input() {
  std::vector<float> x(15);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 100.0f + std::sin(static_cast<float>(i) * 1.7f) * 3.0f;
  return x;
}

// The variance of each group of `x[rows, cols]`: `dim` 1 (each row), 0 (each column) or -1
// (everything), with `correction` subtracted from the count; its square root when `root`.
std::vector<double> reference(const std::vector<float>& x, int rows, int cols, int dim,
                              double correction, bool root) {
  const int groups = dim == 1 ? rows : dim == 0 ? cols : 1;
  const int n = dim == 1 ? cols : dim == 0 ? rows : rows * cols;
  std::vector<double> out;
  for (int g = 0; g < groups; ++g) {
    auto at = [&](int i) {
      return static_cast<double>(dim == 1 ? x[g * cols + i] : dim == 0 ? x[i * cols + g] : x[i]);
    };
    double mean = 0, squares = 0;
    for (int i = 0; i < n; ++i)
      mean += at(i);
    mean /= n;
    for (int i = 0; i < n; ++i)
      squares += (at(i) - mean) * (at(i) - mean);
    const double var = squares / (n - correction);
    out.push_back(root ? std::sqrt(var) : var);
  }
  return out;
}

std::vector<float> run(const std::string& body_text, std::vector<float> x, size_t outputs) {
  auto body = ir::parse_graph(body_text);
  const Kernel k = lower_group(*body, "g");
  std::vector<float> out(outputs, -12345.0f);
  interpret(k, {x.data(), out.data()});
  return out;
}

void expect_near(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  // float32 sums of 15 values near 100 whose squared deviations are ~4.5: the mean rounds to
  // ~1e-5, which moves the variance by its square; the rest is a few float32 roundings of ~10.
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * std::abs(expected[i]) + 1e-6) << i;
}

TEST(LowerVarianceTest, VarCorrectionOverRowsMatchesAHandComputation) {
  expect_near(
      run("graph(%x : f32[3,5]):\n"
          "  %v : f32[3] = aten::var.correction(%x) {dim=[1], correction=1, keepdim=false}\n"
          "  return (%v)\n",
          input(), 3),
      reference(input(), 3, 5, 1, 1, false));
}

TEST(LowerVarianceTest, AFractionalCorrectionOverColumnsKeepingTheDim) {
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %v : f32[1,5] = aten::var.correction(%x) {dim=[0], correction=0.5, "
                  "keepdim=true}\n"
                  "  return (%v)\n",
                  input(), 5),
              reference(input(), 3, 5, 0, 0.5, false));
}

TEST(LowerVarianceTest, NoneCorrectionMeansOne) {
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %v : f32[3] = aten::var.correction(%x) {dim=[-1], correction=None, "
                  "keepdim=false}\n"
                  "  return (%v)\n",
                  input(), 3),
              reference(input(), 3, 5, 1, 1, false));
}

TEST(LowerVarianceTest, VarDimWithUnbiasedFalseDividesByTheCount) {
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %v : f32[3] = aten::var.dim(%x) {dim=[1], unbiased=false, keepdim=false}\n"
                  "  return (%v)\n",
                  input(), 3),
              reference(input(), 3, 5, 1, 0, false));
}

TEST(LowerVarianceTest, VarOfEverythingIsUnbiased) {
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %v : f32[] = aten::var(%x) {unbiased=true}\n"
                  "  return (%v)\n",
                  input(), 1),
              reference(input(), 3, 5, -1, 1, false));
}

TEST(LowerVarianceTest, StdIsTheRootOfEachOverload) {
  expect_near(
      run("graph(%x : f32[3,5]):\n"
          "  %s : f32[3] = aten::std.correction(%x) {dim=[1], correction=2, keepdim=false}\n"
          "  return (%s)\n",
          input(), 3),
      reference(input(), 3, 5, 1, 2, true));
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %s : f32[5] = aten::std.dim(%x) {dim=[0], unbiased=true, keepdim=false}\n"
                  "  return (%s)\n",
                  input(), 5),
              reference(input(), 3, 5, 0, 1, true));
  expect_near(run("graph(%x : f32[3,5]):\n"
                  "  %s : f32[] = aten::std(%x) {unbiased=false}\n"
                  "  return (%s)\n",
                  input(), 1),
              reference(input(), 3, 5, -1, 0, true));
}

using testing::can_lower_first;

TEST(LowerVarianceTest, ACorrectionThatLeavesNoDegreeOfFreedomIsLeftToATen) {
  // ATen divides by max(0, n - correction): inf or NaN, which it gives exactly.
  EXPECT_FALSE(can_lower_first(
      "graph(%x : f32[3,1]):\n"
      "  %v : f32[3] = aten::var.correction(%x) {dim=[1], correction=1, keepdim=false}\n"
      "  return (%v)\n"));
  EXPECT_FALSE(can_lower_first(
      "graph(%x : f32[3,2]):\n"
      "  %v : f32[3] = aten::std.correction(%x) {dim=[1], correction=3, keepdim=false}\n"
      "  return (%v)\n"));
  EXPECT_TRUE(can_lower_first(
      "graph(%x : f32[3,2]):\n"
      "  %v : f32[3] = aten::var.correction(%x) {dim=[1], correction=1, keepdim=false}\n"
      "  return (%v)\n"));
}

TEST(LowerVarianceTest, IntegerInputsAreLeftToATen) {
  EXPECT_FALSE(
      can_lower_first("graph(%x : i64[3,5]):\n"
                      "  %v : i64[3] = aten::var.dim(%x) {dim=[1], unbiased=true, "
                      "keepdim=false}\n"
                      "  return (%v)\n"));
}

}  // namespace
}  // namespace kiln::kernel
