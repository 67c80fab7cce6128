// hardswish, hardsigmoid, leaky_relu, elu, selu, celu, softplus, mish, sign, log1p, expm1,
// maximum and minimum, lowered to the kernel IR (passes/kernel/lower_ops.cpp) and run through the
// reference interpreter, against ATen's definitions written out by hand (values chosen at their
// corners: the clamp's ends, 0, -0, NaN).
#include <cmath>
#include <limits>
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

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const std::vector<float> kCorners = {-4.0f, -3.0f, -1.5f, -0.0f, 0.0f,
                                     0.5f,  3.0f,  7.0f,  kNaN,  -kInf};

/// Runs a one-op graph `%y : f32[10] = <op>(%x...) <attrs>` over the given inputs.
std::vector<float> run(const std::string& op, const std::string& attrs,
                       std::vector<std::vector<float>> inputs) {
  std::string params, args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    params += std::string(i ? ", " : "") + "%x" + std::to_string(i) + " : f32[10]";
    args += std::string(i ? ", " : "") + "%x" + std::to_string(i);
  }
  auto body = ir::parse_graph("graph(" + params + "):\n  %y : f32[10] = " + op + "(" + args + ") " +
                              attrs + "\n  return (%y)\n");
  const Kernel k = lower_group(*body, "g");
  std::vector<float> out(10, -12345.0f);
  std::vector<void*> pointers;
  for (auto& v : inputs)
    pointers.push_back(v.data());
  pointers.push_back(out.data());
  interpret(k, pointers);
  return out;
}

// Equal as ATen's results are: the same bits for zeros (their sign), NaN where NaN.
void expect_same(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << i;
    } else {
      EXPECT_EQ(actual[i], expected[i]) << i;
      EXPECT_EQ(std::signbit(actual[i]), std::signbit(expected[i])) << i;
    }
  }
}

// ATen's order of operations (ATen/native/cpu/Activation.cpp), NaN propagating through the clamp.
float gate(float x) {
  return std::isnan(x) ? x : std::min(std::max(x + 3.0f, 0.0f), 6.0f);
}

TEST(LowerActivationsTest, HardswishIsXTimesTheClampedGateOverSix) {
  std::vector<float> expected;
  for (float x : kCorners)
    expected.push_back(x * gate(x) / 6.0f);
  expect_same(run("aten::hardswish", "", {kCorners}), expected);
}

TEST(LowerActivationsTest, HardsigmoidIsTheClampedGateOverSix) {
  std::vector<float> expected;
  for (float x : kCorners)
    expected.push_back(gate(x) / 6.0f);
  expect_same(run("aten::hardsigmoid", "", {kCorners}), expected);
}

TEST(LowerActivationsTest, LeakyReluScalesWhatIsNotPositive) {
  std::vector<float> expected, expected_default;
  for (float x : kCorners) {
    expected.push_back(x > 0 ? x : x * -0.5f);  // -0 * -0.5 is +0, as in ATen
    expected_default.push_back(x > 0 ? x : x * 0.01f);
  }
  expect_same(run("aten::leaky_relu", "{negative_slope=-0.5}", {kCorners}), expected);
  expect_same(run("aten::leaky_relu", "{negative_slope=0.01}", {kCorners}), expected_default);
}

TEST(LowerActivationsTest, SignIsZeroForNaNAndBothZeros) {
  // ATen's (0 < x) - (x < 0): torch.sign(nan) is 0 on the CPU, and sign(-0.0) is +0.
  expect_same(run("aten::sign", "", {kCorners}),
              {-1.0f, -1.0f, -1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f, -1.0f});
}

TEST(LowerActivationsTest, MaximumAndMinimumPropagateNaNFromEitherSide) {
  // No pair of zeros: which of -0 and +0 ATen returns depends on its code path (vector or not).
  const std::vector<float> other = {0.0f, kNaN, -2.0f, 1.0f, -1.0f, 0.5f, kInf, 1.0f, 1.0f, 2.0f};
  expect_same(run("aten::maximum", "", {kCorners, other}),
              {0.0f, kNaN, -1.5f, 1.0f, 0.0f, 0.5f, kInf, 7.0f, kNaN, 2.0f});
  expect_same(run("aten::minimum", "", {kCorners, other}),
              {-4.0f, kNaN, -2.0f, -0.0f, -1.0f, 0.5f, 3.0f, 1.0f, kNaN, -kInf});
}

// Within `ulps` units in the last place of float32 of `expected` (computed in double); special
// values (NaN, infinities, zeros with their sign) exactly.
void expect_within_ulps(const std::vector<float>& actual, const std::vector<double>& expected,
                        double ulps) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(actual[i])) << i;
    } else if (std::isinf(e) || e == 0) {
      EXPECT_EQ(actual[i], e) << i;
      EXPECT_EQ(std::signbit(actual[i]), std::signbit(e)) << i;
    } else {
      const double ulp = std::ldexp(1.0, std::ilogb(e) - 23);
      EXPECT_LE(std::abs(actual[i] - e), ulps * ulp) << i << ": " << actual[i] << " vs " << e;
    }
  }
}

// Where log(1 + x) and exp(x) - 1 computed directly lose x's digits (|x| tiny), and the ends.
const std::vector<float> kNearZero = {1e-10f, -3e-8f, 2e-4f, -0.0f, -0.5f,
                                      0.75f,  1e30f,  -1.0f, kInf,  -kInf};

TEST(LowerActivationsTest, Log1pKeepsTheDigitsOfTinyArguments) {
  std::vector<double> expected;
  for (float x : kNearZero)
    expected.push_back(std::log1p(static_cast<double>(x)));
  expect_within_ulps(run("aten::log1p", "", {kNearZero}), expected, 4);
}

TEST(LowerActivationsTest, Expm1KeepsTheDigitsOfTinyArguments) {
  std::vector<double> expected;
  for (float x : kNearZero)
    expected.push_back(std::expm1(static_cast<double>(x)));
  expect_within_ulps(run("aten::expm1", "", {kNearZero}), expected, 4);
}

TEST(LowerActivationsTest, EluIsExpm1BelowZeroScaledAsSeluAsks) {
  constexpr double alpha = 1.6732632423543772, scale = 1.0507009873554805;
  std::vector<double> expected;
  for (float x : kNearZero) {
    const double v = x;
    expected.push_back(std::isnan(v) ? v : v <= 0 ? std::expm1(v * 2) * alpha * scale : v * scale);
  }
  expect_within_ulps(run("aten::elu",
                         "{alpha=1.6732632423543772, scale=1.0507009873554805, "
                         "input_scale=2}",
                         {kNearZero}),
                     expected, 4);
}

TEST(LowerActivationsTest, SeluAndCeluAreElusWithTheirConstants) {
  constexpr double alpha = 1.6732632423543772, scale = 1.0507009873554805;
  std::vector<double> selu, celu;
  for (float x : kNearZero) {
    const double v = x;
    selu.push_back(std::isnan(v) ? v : v <= 0 ? std::expm1(v) * alpha * scale : v * scale);
    celu.push_back(std::isnan(v) ? v : v <= 0 ? std::expm1(v / 0.5) * 0.5 : v);
  }
  expect_within_ulps(run("aten::selu", "", {kNearZero}), selu, 4);
  expect_within_ulps(run("aten::celu", "{alpha=0.5}", {kNearZero}), celu, 4);
}

TEST(LowerActivationsTest, SoftplusIsXAboveItsThresholdAndLog1pOfExpBelow) {
  // beta = 2, threshold = 5: 2.4 and 2.6 fall on either side of x * beta = 5.
  const std::vector<float> xs = {2.4f, 2.6f, -0.0f, 0.5f, -3.0f, -30.0f, 1e-7f, 1e30f, kInf, -kInf};
  std::vector<double> expected;
  for (float x : xs) {
    const double v = x;
    expected.push_back(v * 2 > 5 ? v : std::log1p(std::exp(v * 2)) / 2);
  }
  expect_within_ulps(run("aten::softplus", "{beta=2, threshold=5}", {xs}), expected, 4);
  std::vector<double> defaults;  // beta = 1, threshold = 20
  for (float x : kNearZero)
    defaults.push_back(x > 20 ? x : std::log1p(std::exp(static_cast<double>(x))));
  expect_within_ulps(run("aten::softplus", "", {kNearZero}), defaults, 4);
}

TEST(LowerActivationsTest, MishIsXTimesTanhOfSoftplus) {
  std::vector<double> expected;
  for (float x : kNearZero) {
    const double v = x;
    expected.push_back(v * std::tanh(std::log1p(std::exp(v))));  // -inf * 0: NaN, as in ATen
  }
  expect_within_ulps(run("aten::mish", "", {kNearZero}), expected, 4);
}

using testing::can_lower_first;

TEST(LowerActivationsTest, IntegerActivationsAreLeftToATenButIntegerSignAndMaximumAreLowered) {
  EXPECT_FALSE(
      can_lower_first("graph(%x : i64[4]):\n"
                      "  %y : i64[4] = aten::hardswish(%x)\n"
                      "  return (%y)\n"));
  EXPECT_TRUE(
      can_lower_first("graph(%x : i64[4]):\n"
                      "  %y : i64[4] = aten::sign(%x)\n"
                      "  return (%y)\n"));
  EXPECT_TRUE(
      can_lower_first("graph(%x : i32[4], %z : i32[4]):\n"
                      "  %y : i32[4] = aten::maximum(%x, %z)\n"
                      "  return (%y)\n"));
}

}  // namespace
}  // namespace kiln::kernel
