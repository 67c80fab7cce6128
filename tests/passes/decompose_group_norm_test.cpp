#include <string>

#include <gtest/gtest.h>

#include "passes/decompose_group_norm.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

// GroupNorm(2, 4) on [2, 4, 3, 3], then a SiLU.
const char* kGroupNorm =
    "graph(%x : f32[2,4,3,3]):\n"
    "  %g : f32[4] = prim::Constant() {index=0}\n"
    "  %b : f32[4] = prim::Constant() {index=1}\n"
    "  %y : f32[2,4,3,3] = aten::group_norm(%x, %g, %b) {num_groups=2, eps=1e-05, "
    "cudnn_enabled=true}\n"
    "  %z : f32[2,4,3,3] = aten::silu(%y)\n"
    "  return (%z)\n";

std::string decomposed(const std::string& text, int expected) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(decompose_group_norm(*g), expected);
  return ir::print_graph(*g);
}

bool has(const std::string& printed, const std::string& text) {
  return printed.find(text) != std::string::npos;
}

TEST(DecomposeGroupNormTest, StatisticsPerChannelCombinedPerGroupThenAScaleAndShift) {
  const std::string printed = decomposed(kGroupNorm, 1);
  EXPECT_FALSE(has(printed, "aten::group_norm")) << printed;
  // per sample and channel, over the spatial dims, straight from x (no view of it)
  EXPECT_TRUE(has(printed,
                  "f32[2,4,1,1] = aten::var.correction(%x) {dim=[2,3], correction=0, "
                  "keepdim=true}"))
      << printed;
  EXPECT_TRUE(has(printed, "f32[2,4,1,1] = aten::mean.dim(%x) {dim=[2,3], keepdim=true"))
      << printed;
  EXPECT_FALSE(has(printed, "aten::view(%x)")) << printed;
  // per group: [N, G, D], reduced over D, the variances' mean plus the means' variance
  EXPECT_TRUE(has(printed, "f32[2,2,2] = aten::view(")) << printed;
  EXPECT_TRUE(has(printed, "f32[2,2,1] = aten::var.correction(")) << printed;
  EXPECT_TRUE(has(printed, "{dim=[2], correction=0, keepdim=true}")) << printed;
  EXPECT_TRUE(has(printed, "f32[2,2,1] = aten::add.Tensor(")) << printed;
  EXPECT_TRUE(has(printed, "{other=1.0000000000000001e-05, alpha=1}")) << printed;
  // gamma and beta per group and channel, the scale and shift per sample and channel
  EXPECT_TRUE(has(printed, "f32[1,2,2] = aten::view(%g) {size=[1,2,2]}")) << printed;
  EXPECT_TRUE(has(printed, "f32[1,2,2] = aten::view(%b) {size=[1,2,2]}")) << printed;
  EXPECT_TRUE(has(printed, "f32[2,4,1,1] = aten::view(")) << printed;
  EXPECT_TRUE(has(printed, "f32[2,4,3,3] = aten::mul.Tensor(%x, ")) << printed;
  // x * scale + shift takes the group norm's name, and the silu reads it
  EXPECT_TRUE(has(printed, "  %y : f32[2,4,3,3] = aten::add.Tensor(")) << printed;
  EXPECT_TRUE(has(printed, "aten::silu(%y)")) << printed;
}

TEST(DecomposeGroupNormTest, ASequenceChannelsLastAndNoBias) {
  // [N, C, L] (one spatial dim) stored channels-last, weight without bias: the shift is
  // -(mean * scale).
  const std::string text =
      "graph(%x : f64[3,6,5]{30,1,6}, %g : f64[6]):\n"
      "  %y : f64[3,6,5] = aten::group_norm(%x, %g) {num_groups=3, bias=None, eps=0.001, "
      "cudnn_enabled=true}\n"
      "  return (%y)\n";
  const std::string printed = decomposed(text, 1);
  EXPECT_TRUE(has(printed, "f64[3,6,1] = aten::var.correction(%x) {dim=[2], correction=0"))
      << printed;
  EXPECT_TRUE(has(printed, "f64[3,3,2] = aten::view(")) << printed;
  EXPECT_TRUE(has(printed, "aten::neg(")) << printed;
  EXPECT_TRUE(has(printed, "f64[3,6,1] = aten::view(")) << printed;
}

TEST(DecomposeGroupNormTest, AnInferenceNativeGroupNormKeepsItsChannelsLastType) {
  // torch.compile's form: mean and rstd outputs nobody reads; the output's type (channels-last,
  // as ATen's CPU kernel gives it) is what x * scale + shift is typed.
  const std::string text =
      "graph(%x : f32[2,4,3,3]{36,1,12,4}, %g : f32[4], %b : f32[4]):\n"
      "  %y : f32[2,4,3,3]{36,1,12,4}, %m : f32[2,2], %r : f32[2,2] = "
      "aten::native_group_norm(%x, %g, %b) {N=2, C=4, HxW=9, group=2, eps=1e-05}\n"
      "  return (%y)\n";
  const std::string printed = decomposed(text, 1);
  EXPECT_FALSE(has(printed, "native_group_norm")) << printed;
  EXPECT_TRUE(has(printed, "  %y : f32[2,4,3,3]{36,1,12,4} = aten::add.Tensor(")) << printed;
  // with its statistics read (a training forward), it stays
  std::string training = text;
  training.replace(training.find("return (%y)"), 11, "return (%y, %m, %r)");
  decomposed(training, 0);
}

TEST(DecomposeGroupNormTest, WhatStaysWithATen) {
  // no weight (affine=False): the scale is per group, and would need broadcasting to channels
  decomposed(
      "graph(%x : f32[2,4,3,3]):\n"
      "  %y : f32[2,4,3,3] = aten::group_norm(%x) {num_groups=2, weight=None, bias=None, "
      "eps=1e-05, cudnn_enabled=true}\n"
      "  return (%y)\n",
      0);
  // channels not divisible by the groups: ATen's error is kept
  std::string uneven = kGroupNorm;
  uneven.replace(uneven.find("num_groups=2"), 12, "num_groups=3");
  decomposed(uneven, 0);
  // half precision: ATen computes in float32 and rounds once
  std::string half = kGroupNorm;
  for (size_t at; (at = half.find("f32")) != std::string::npos;)
    half.replace(at, 3, "f16");
  decomposed(half, 0);
  // a [N, C] input: no spatial dims to reduce
  decomposed(
      "graph(%x : f32[2,4], %g : f32[4], %b : f32[4]):\n"
      "  %y : f32[2,4] = aten::group_norm(%x, %g, %b) {num_groups=2, eps=1e-05, "
      "cudnn_enabled=true}\n"
      "  return (%y)\n",
      0);
  // an empty input
  decomposed(
      "graph(%x : f32[0,4,3,3], %g : f32[4], %b : f32[4]):\n"
      "  %y : f32[0,4,3,3] = aten::group_norm(%x, %g, %b) {num_groups=2, eps=1e-05, "
      "cudnn_enabled=true}\n"
      "  return (%y)\n",
      0);
}

}  // namespace
}  // namespace kiln
