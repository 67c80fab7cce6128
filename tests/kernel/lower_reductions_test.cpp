// Lowering reductions and normalizations (softmax, log_softmax, layer_norm, sums, means, amax,
// siblings) to kernels, checked on the printed kernel and through the interpreter.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/kernel/printer.h"
#include "tests/kernel/lower_support.h"
#include "tests/support/check_pattern.h"

namespace kiln::kernel {
namespace {

using namespace lower_test;

// Softmax of a row-major [rows, cols] matrix along dim (0 or 1), in double.
std::vector<double> softmax_reference(const std::vector<float>& x, int rows, int cols, int dim) {
  std::vector<double> out(x.size());
  const int outer = dim == 1 ? rows : cols, inner = dim == 1 ? cols : rows;
  for (int o = 0; o < outer; ++o) {
    auto at = [&](int i) { return dim == 1 ? o * cols + i : i * cols + o; };
    double m = -INFINITY, s = 0;
    for (int i = 0; i < inner; ++i)
      m = std::max(m, static_cast<double>(x[at(i)]));
    for (int i = 0; i < inner; ++i)
      s += std::exp(x[at(i)] - m);
    for (int i = 0; i < inner; ++i)
      out[at(i)] = std::exp(x[at(i)] - m) / s;
  }
  return out;
}

// ---- Reductions and normalizations -------------------------------------------------------------

TEST(LowerGroupTest, SoftmaxOverTheLastDimMatchesAHandComputation) {
  Kernel k = lower(
      "graph(%x : f32[3,5]):\n"
      "  %p : f32[3,5] = aten::softmax.int(%x) {dim=-1, dtype=None}\n"
      "  return (%p)\n");
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: kernel g [3, 5] reduce 1
    CHECK: load b0[5, 1]
    CHECK: reduce.max
    CHECK: exp
    CHECK: reduce.sum
    CHECK: store b1[5, 1]
  )"));
  const auto x = iota_data(15, 3.0f, 0.2f);
  const auto out = run_f32(k, {x}, {15});
  const auto ref = softmax_reference(x, 3, 5, 1);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(out[0][i], ref[i], 1e-6) << i;
}

TEST(LowerGroupTest, SoftmaxOverDimZeroPutsTheReducedDimLast) {
  Kernel k = lower(
      "graph(%x : f32[3,5]):\n"
      "  %p : f32[3,5] = aten::softmax.int(%x) {dim=0, dtype=None}\n"
      "  return (%p)\n");
  EXPECT_EQ(k.sizes, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(k.reduce_rank, 1);
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: load b0[1, 5]
    CHECK: store b1[1, 5]
  )"));
}

TEST(LowerGroupTest, SoftmaxOverDimZeroMatchesAHandComputation) {
  Kernel k = lower(
      "graph(%x : f32[3,5]):\n"
      "  %p : f32[3,5] = aten::softmax.int(%x) {dim=0, dtype=None}\n"
      "  return (%p)\n");
  const auto x = iota_data(15, 3.0f, 0.7f);
  const auto out = run_f32(k, {x}, {15});
  const auto ref = softmax_reference(x, 3, 5, 0);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(out[0][i], ref[i], 1e-6) << i;
}

TEST(LowerGroupTest, LogSoftmaxMatchesAHandComputation) {
  Kernel k = lower(
      "graph(%x : f32[2,4]):\n"
      "  %p : f32[2,4] = aten::_log_softmax(%x) {dim=1, half_to_float=false}\n"
      "  return (%p)\n");
  const auto x = iota_data(8, 4.0f, 0.0f);
  const auto out = run_f32(k, {x}, {8});
  const auto ref = softmax_reference(x, 2, 4, 1);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(out[0][i], std::log(ref[i]), 1e-5) << i;
}

TEST(LowerGroupTest, SoftmaxWithProducerAndConsumer) {
  // The fused body that fuse_reductions forms for x * 2 -> softmax -> gelu.
  Kernel k = lower(
      "graph(%x : f32[2,3]):\n"
      "  %s : f32[2,3] = aten::mul.Scalar(%x) {other=2.0}\n"
      "  %p : f32[2,3] = aten::softmax.int(%s) {dim=-1, dtype=None}\n"
      "  %g : f32[2,3] = aten::gelu(%p) {approximate=\"none\"}\n"
      "  return (%g)\n");
  const std::vector<float> x = {0.1f, -0.4f, 0.9f, 1.5f, 0.0f, -2.0f};
  const auto out = run_f32(k, {x}, {6});
  std::vector<float> scaled(6);
  for (int i = 0; i < 6; ++i)
    scaled[i] = 2 * x[i];
  const auto p = softmax_reference(scaled, 2, 3, 1);
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(out[0][i], 0.5 * p[i] * (1 + std::erf(p[i] / std::sqrt(2.0))), 1e-6) << i;
}

// Layer norm over the last dim of a row-major [rows, cols] matrix, in double.
std::vector<double> layer_norm_reference(const std::vector<float>& x, int rows, int cols,
                                         const std::vector<float>* weight,
                                         const std::vector<float>* bias, double eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < cols; ++c)
      mean += x[r * cols + c];
    mean /= cols;
    for (int c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= cols;
    for (int c = 0; c < cols; ++c) {
      double y = (x[r * cols + c] - mean) / std::sqrt(var + eps);
      if (weight) y *= (*weight)[c];
      if (bias) y += (*bias)[c];
      out[r * cols + c] = y;
    }
  }
  return out;
}

TEST(LowerGroupTest, LayerNormWithWeightAndBiasMatchesAHandComputation) {
  // As the importer writes it: present optional tensors are inputs, with no attribute.
  Kernel k = lower(
      "graph(%x : f32[4,8], %w : f32[8], %b : f32[8]):\n"
      "  %y : f32[4,8] = aten::layer_norm(%x, %w, %b) {normalized_shape=[8], eps=1e-05, "
      "cudnn_enable=true}\n"
      "  return (%y)\n");
  EXPECT_EQ(count_ops(k, Op::Load), 3);
  const auto x = iota_data(32, 2.0f, 0.3f);
  const auto w = iota_data(8, 1.5f, 1.0f);
  const auto b = iota_data(8, 0.5f, 2.0f);
  const auto out = run_f32(k, {x, w, b}, {32});
  const auto ref = layer_norm_reference(x, 4, 8, &w, &b, 1e-5);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(out[0][i], ref[i], 1e-5) << i;
}

TEST(LowerGroupTest, LayerNormWithoutWeightAndBias) {
  Kernel k = lower(
      "graph(%x : f32[4,8]):\n"
      "  %y : f32[4,8] = aten::layer_norm(%x) {normalized_shape=[8], weight=None, bias=None, "
      "eps=1e-05, cudnn_enable=true}\n"
      "  return (%y)\n");
  const auto x = iota_data(32, 2.0f, 0.3f);
  const auto out = run_f32(k, {x}, {32});
  const auto ref = layer_norm_reference(x, 4, 8, nullptr, nullptr, 1e-5);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(out[0][i], ref[i], 1e-5) << i;
}

TEST(LowerGroupTest, LayerNormWithBiasOnly) {
  Kernel k = lower(
      "graph(%x : f32[2,4], %b : f32[4]):\n"
      "  %y : f32[2,4] = aten::layer_norm(%x, %b) {normalized_shape=[4], weight=None, "
      "eps=1e-05, cudnn_enable=true}\n"
      "  return (%y)\n");
  const auto x = iota_data(8, 2.0f, 0.3f);
  const std::vector<float> b = {1, 2, 3, 4};
  const auto out = run_f32(k, {x, b}, {8});
  const auto ref = layer_norm_reference(x, 2, 4, nullptr, &b, 1e-5);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(out[0][i], ref[i], 1e-5) << i;
}

TEST(LowerGroupTest, SumWithoutKeepdimFeedsARowConsumerStoredPerRow) {
  Kernel k = lower(
      "graph(%x : f32[4,8]):\n"
      "  %s : f32[4] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %t : f32[4] = aten::mul.Scalar(%s) {other=2}\n"
      "  return (%t)\n");
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: kernel g [4, 8] reduce 1
    CHECK: reduce.sum
    CHECK: mul
    CHECK: store b1[1, 0]
  )"));
  const auto x = iota_data(32, 1.0f, 0.0f);
  const auto out = run_f32(k, {x}, {4});
  for (int r = 0; r < 4; ++r) {
    double s = 0;
    for (int c = 0; c < 8; ++c)
      s += x[r * 8 + c];
    EXPECT_NEAR(out[0][r], 2 * s, 1e-5) << r;
  }
}

TEST(LowerGroupTest, SumWithKeepdimFeedsAnElementConsumer) {
  // x - x.sum(1, keepdim=True)
  Kernel k = lower(
      "graph(%x : f32[2,3]):\n"
      "  %s : f32[2,1] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=true, dtype=None}\n"
      "  %d : f32[2,3] = aten::sub.Tensor(%x, %s) {alpha=1}\n"
      "  return (%d, %s)\n");
  const auto out = run_f32(k, {{1, 2, 3, 10, 20, 30}}, {6, 2});
  EXPECT_EQ(out[0], (std::vector<float>{-5, -4, -3, -50, -40, -30}));
  EXPECT_EQ(out[1], (std::vector<float>{6, 60}));
}

TEST(LowerGroupTest, MeanOverAMiddleDimWithARowConsumer) {
  // x.mean(1) * w over x : [2,3,4]: the kernel iterates [2,4,3], reducing the last.
  Kernel k = lower(
      "graph(%x : f32[2,3,4], %w : f32[4]):\n"
      "  %m : f32[2,4] = aten::mean.dim(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %y : f32[2,4] = aten::mul.Tensor(%m, %w)\n"
      "  return (%y)\n");
  EXPECT_EQ(k.sizes, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: load b0[12, 1, 4]
    CHECK: load b1[0, 1, 0]
    CHECK: store b2[4, 1, 0]
  )"));
  const auto x = iota_data(24, 1.0f, 0.0f);
  const std::vector<float> w = {1, -1, 2, 0.5f};
  const auto out = run_f32(k, {x, w}, {8});
  for (int i = 0; i < 2; ++i) {
    for (int l = 0; l < 4; ++l) {
      double m = 0;
      for (int j = 0; j < 3; ++j)
        m += x[i * 12 + j * 4 + l];
      EXPECT_NEAR(out[0][i * 4 + l], m / 3 * w[l], 1e-6) << i << "," << l;
    }
  }
}

TEST(LowerGroupTest, KeepdimOverAMiddleDimMeetsWholeRows) {
  // x - x.amax(1, keepdim=True) over [2,3,2]; the [2,1,2] maxes are a second output.
  Kernel k = lower(
      "graph(%x : f32[2,3,2]):\n"
      "  %m : f32[2,1,2] = aten::amax(%x) {dim=[1], keepdim=true}\n"
      "  %d : f32[2,3,2] = aten::sub.Tensor(%x, %m) {alpha=1}\n"
      "  return (%d, %m)\n");
  EXPECT_TRUE(matches_checks(print_kernel(k), R"(
    CHECK: kernel g [2, 2, 3] reduce 1
    CHECK: load b0[6, 1, 2]
    CHECK: store b1[6, 1, 2]
    CHECK: store b2[2, 1, 0]
  )"));
  const std::vector<float> x = {1, 8, 5, 2, 3, 4, -1, -2, -3, -4, -5, -6};
  const auto out = run_f32(k, {x}, {12, 4});
  EXPECT_EQ(out[1], (std::vector<float>{5, 8, -1, -2}));
  EXPECT_EQ(out[0], (std::vector<float>{-4, 0, 0, -6, -2, -4, 0, 0, -2, -2, -4, -4}));
}

TEST(LowerGroupTest, FullSumToAScalar) {
  Kernel k = lower(
      "graph(%x : f32[2,3]):\n"
      "  %s : f32[] = aten::sum(%x) {dtype=None}\n"
      "  return (%s)\n");
  EXPECT_EQ(k.reduce_rank, 2);
  const auto out = run_f32(k, {{1, 2, 3, 4, 5, 6}}, {1});
  EXPECT_EQ(out[0][0], 21.0f);
}

TEST(LowerGroupTest, IntSumAccumulatesInInt64) {
  Kernel k = lower(
      "graph(%x : i32[1,2]):\n"
      "  %s : i64[1] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  return (%s)\n");
  std::vector<int32_t> x = {2147483647, 2147483647};
  std::vector<int64_t> out(1, 0);
  interpret(k, {x.data(), out.data()});
  EXPECT_EQ(out[0], int64_t{2} * 2147483647);
}

TEST(LowerGroupTest, AmaxOverTheLastDim) {
  Kernel k = lower(
      "graph(%x : f32[2,3]):\n"
      "  %m : f32[2] = aten::amax(%x) {dim=[-1], keepdim=false}\n"
      "  return (%m)\n");
  const auto out = run_f32(k, {{1, 7, 3, -4, -2, -9}}, {2});
  EXPECT_EQ(out[0], (std::vector<float>{7, -2}));
}

TEST(LowerGroupTest, ACastBeforeAReductionIsLoweredAsACast) {
  // aten::to.dtype is a view in the op table (it aliases when the dtype does not change), but
  // not one that only reshapes: it lowers as a cast, not as the view of a reduced value.
  const Kernel k = lower(
      "graph(%i : i64[5,2]):\n"
      "  %f : f32[5,2] = aten::to.dtype(%i) {dtype=6, non_blocking=false, copy=false, "
      "memory_format=None}\n"
      "  %s : f32[2] = aten::sum.dim_IntList(%f) {dim=[0], keepdim=false, dtype=None}\n"
      "  return (%s)\n");
  std::vector<int64_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<float> out(2, -1.0f);
  interpret(k, {in.data(), out.data()});
  EXPECT_EQ(out, (std::vector<float>{25.0f, 30.0f}));
}

TEST(LowerGroupTest, SiblingReductionsShareOneKernel) {
  // Batch norm's backward: the sum of the gradient and of the gradient times x - mean, per
  // channel of [2, 3, 4] (dims 0 and 2 reduced), then a row consumer of both.
  const Kernel k = lower(
      "graph(%g : f32[2,3,4], %x : f32[2,3,4], %m : f32[1,3,1]):\n"
      "  %c : f32[2,3,4] = aten::sub.Tensor(%x, %m) {alpha=1}\n"
      "  %p : f32[2,3,4] = aten::mul.Tensor(%g, %c)\n"
      "  %a : f32[3] = aten::sum.dim_IntList(%g) {dim=[0,2], keepdim=false, dtype=None}\n"
      "  %b : f32[3] = aten::sum.dim_IntList(%p) {dim=[0,2], keepdim=false, dtype=None}\n"
      "  %r : f32[3] = aten::mul.Tensor(%a, %b)\n"
      "  return (%a, %b, %r)\n");
  EXPECT_EQ(count_ops(k, Op::Reduce), 2);
  EXPECT_EQ(k.reduce_rank, 2);
  const std::vector<float> g = iota_data(24, 1.5f, 0.2f), x = iota_data(24, 2.0f, 1.1f),
                           m = {0.5f, -0.25f, 1.0f};
  const auto out = run_f32(k, {g, x, m}, {3, 3, 3});
  for (int c = 0; c < 3; ++c) {
    double a = 0, b = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) {
        const int at = n * 12 + c * 4 + i;
        a += g[at];
        b += static_cast<double>(g[at]) * (x[at] - m[c]);
      }
    EXPECT_NEAR(out[0][c], a, 1e-5) << c;
    EXPECT_NEAR(out[1][c], b, 1e-5) << c;
    EXPECT_NEAR(out[2][c], a * b, 1e-4) << c;
  }
}

}  // namespace
}  // namespace kiln::kernel
