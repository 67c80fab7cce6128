#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/prepack_linear.h"

namespace kiln {
namespace {

// A BERT feed-forward layer's first linear: 128 x 768 x 3072 multiply-adds.
const char* kLinear =
    "graph(%x : f32[128,768]):\n"
    "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
    "  %b : f32[3072] = prim::Constant() {index=1}\n"
    "  %y : f32[128,3072] = aten::linear(%x, %w, %b)\n"
    "  return (%y)\n";

TEST(PrepackLinearTest, AFrozenWeightIsReorderedOnceForOneDnnsMatmul) {
  auto g = ir::parse_graph(kLinear);
  EXPECT_EQ(prepack_linear(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[128,768]):\n"
            "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
            "  %b : f32[3072] = prim::Constant() {index=1}\n"
            "  %w_packed : f32[3072,768] = mkldnn::_reorder_linear_weight(%w) "
            "{batch_size=128}\n"
            "  %y : f32[128,3072] = mkldnn::_linear_pointwise(%x, %w_packed, %b) "
            "{attr=\"none\", scalars=[], algorithm=\"\"}\n"
            "  return (%y)\n");
}

TEST(PrepackLinearTest, WithItsOwnPrimitiveTheDenseWeightStaysBesideThePackedOne) {
  auto g = ir::parse_graph(kLinear);
  EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[128,768]):\n"
            "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
            "  %b : f32[3072] = prim::Constant() {index=1}\n"
            "  %w_onednn : f32[2359312] = kiln::onednn_linear_weight(%w) {rows=128, bias=true}\n"
            "  %y : f32[128,3072] = kiln::onednn_linear(%x, %w, %w_onednn, %b)\n"
            "  return (%y)\n");
}

TEST(PrepackLinearTest, WithItsOwnPrimitiveSmallLinearsArePackedToo) {
  // 16 x 32 x 32 multiply-adds: below kMinPrepackedMacs, where ATen's op costs more than it saves.
  const char* small =
      "graph(%x : f32[16,32]):\n"
      "  %w : f32[32,32] = prim::Constant() {index=0}\n"
      "  %y : f32[16,32] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n";
  EXPECT_EQ(prepack_linear(*ir::parse_graph(small)), 0);
  auto g = ir::parse_graph(small);
  EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("kiln::onednn_linear(%x, %w, %w_onednn) {bias=None}"), std::string::npos)
      << printed;
}

TEST(PrepackLinearTest, ALinearWithoutBiasPassesNone) {
  auto g = ir::parse_graph(
      "graph(%x : f32[2,64,768]):\n"
      "  %w : f32[768,768] = prim::Constant() {index=0}\n"
      "  %y : f32[2,64,768] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n");
  EXPECT_EQ(prepack_linear(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("{batch_size=128}"), std::string::npos) << printed;  // rows of x
  EXPECT_NE(printed.find("mkldnn::_linear_pointwise(%x, %w_packed) {B=None, attr=\"none\""),
            std::string::npos)
      << printed;
}

TEST(PrepackLinearTest, AWeightComputedFromConstantsIsPacked) {
  // After batch-norm folding the weight is an op on constants; fold_constants computes both.
  auto g = ir::parse_graph(
      "graph(%x : f32[128,768]):\n"
      "  %w : f32[768,768] = prim::Constant() {index=0}\n"
      "  %s : f32[768,1] = prim::Constant() {index=1}\n"
      "  %ws : f32[768,768] = aten::mul.Tensor(%w, %s)\n"
      "  %y : f32[128,768] = aten::linear(%x, %ws) {bias=None}\n"
      "  return (%y)\n");
  EXPECT_EQ(prepack_linear(*g), 1);
  EXPECT_NE(ir::print_graph(*g).find("mkldnn::_reorder_linear_weight(%ws)"), std::string::npos);
}

TEST(PrepackLinearTest, LinearsThatStay) {
  const std::vector<std::string> stays = {
      // the weight is a graph input: it would be reordered on every call
      "graph(%x : f32[128,768], %w : f32[3072,768]):\n"
      "  %y : f32[128,3072] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n",
      // too small: 8 x 256 x 256 multiply-adds
      "graph(%x : f32[8,256]):\n"
      "  %w : f32[256,256] = prim::Constant() {index=0}\n"
      "  %y : f32[8,256] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n",
      // at most 4 rows: kiln's own kernel
      "graph(%x : f32[1,4096]):\n"
      "  %w : f32[4096,4096] = prim::Constant() {index=0}\n"
      "  %y : f32[1,4096] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n",
      // float64
      "graph(%x : f64[128,768]):\n"
      "  %w : f64[768,768] = prim::Constant() {index=0}\n"
      "  %y : f64[128,768] = aten::linear(%x, %w) {bias=None}\n"
      "  return (%y)\n",
  };
  for (const std::string& text : stays) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(prepack_linear(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*ir::parse_graph(text)));
  }
}

}  // namespace
}  // namespace kiln
