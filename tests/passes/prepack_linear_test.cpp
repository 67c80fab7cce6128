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

// A linear and an activation read by nothing else: one kiln::onednn_linear that applies it.
std::string with_activation(const std::string& activation, const std::string& extra_output = "") {
  return "graph(%x : f32[128,768]):\n"
         "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
         "  %b : f32[3072] = prim::Constant() {index=1}\n"
         "  %y : f32[128,3072] = aten::linear(%x, %w, %b)\n"
         "  %z : f32[128,3072] = " +
         activation + "\n  return (%z" + extra_output + ")\n";
}

TEST(PrepackLinearTest, WithItsOwnPrimitiveTheActivationAfterRunsInside) {
  for (const auto& [op, name] : std::vector<std::pair<std::string, std::string>>{
           {"aten::relu(%y)", "relu"},
           {"aten::gelu(%y) {approximate=\"none\"}", "gelu"},
           {"aten::gelu(%y)", "gelu"},
           {"aten::gelu(%y) {approximate=\"tanh\"}", "gelu_tanh"},
           {"aten::silu(%y)", "silu"},
           {"aten::sigmoid(%y)", "sigmoid"}}) {
    auto g = ir::parse_graph(with_activation(op));
    EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 1);
    EXPECT_EQ(
        ir::print_graph(*g),
        "graph(%x : f32[128,768]):\n"
        "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
        "  %b : f32[3072] = prim::Constant() {index=1}\n"
        "  %w_onednn : f32[2359312] = kiln::onednn_linear_weight(%w) {rows=128, bias=true, "
        "activation=\"" +
            name +
            "\"}\n"
            "  %z : f32[128,3072] = kiln::onednn_linear(%x, %w, %w_onednn, %b) {activation=\"" +
            name +
            "\"}\n"
            "  return (%z)\n")
        << op;
  }
}

TEST(PrepackLinearTest, WithItsOwnPrimitiveABiasAddedAfterwardsBecomesItsBias) {
  // Core ATen's linear over a transposed 3-D input: the product, then the bias added.
  auto g = ir::parse_graph(
      "graph(%x : f32[1,512,196]{100352,1,512}):\n"
      "  %w : f32[256,196] = prim::Constant() {index=0}\n"
      "  %y : f32[1,512,256] = aten::linear(%x, %w) {bias=None}\n"
      "  %b : f32[256] = prim::Constant() {index=1}\n"
      "  %s : f32[1,512,256] = aten::add.Tensor(%y, %b) {alpha=1}\n"
      "  %z : f32[1,512,256] = aten::gelu(%s) {approximate=\"none\"}\n"
      "  return (%z)\n");
  EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[1,512,196]{100352,1,512}):\n"
            "  %w : f32[256,196] = prim::Constant() {index=0}\n"
            "  %w_onednn : f32[50192] = kiln::onednn_linear_weight(%w) {rows=512, bias=true, "
            "activation=\"gelu\"}\n"
            "  %b : f32[256] = prim::Constant() {index=1}\n"
            "  %z : f32[1,512,256] = kiln::onednn_linear(%x, %w, %w_onednn, %b) "
            "{activation=\"gelu\"}\n"
            "  return (%z)\n");
  // Not an add of a vector of the outputs (a [512, 1] column), nor with alpha 2: they stay.
  for (const std::string& add : {"  %b : f32[512,1] = prim::Constant() {index=1}\n"
                                 "  %s : f32[1,512,256] = aten::add.Tensor(%y, %b) {alpha=1}\n",
                                 "  %b : f32[256] = prim::Constant() {index=1}\n"
                                 "  %s : f32[1,512,256] = aten::add.Tensor(%y, %b) {alpha=2}\n"}) {
    auto kept = ir::parse_graph(
        "graph(%x : f32[1,512,196]):\n"
        "  %w : f32[256,196] = prim::Constant() {index=0}\n"
        "  %y : f32[1,512,256] = aten::linear(%x, %w) {bias=None}\n" +
        add + "  return (%s)\n");
    EXPECT_EQ(prepack_linear(*kept, /*own_primitive=*/true), 1);
    const std::string printed = ir::print_graph(*kept);
    EXPECT_NE(printed.find("aten::add.Tensor"), std::string::npos) << printed;
    EXPECT_NE(printed.find("{bias=None}"), std::string::npos) << printed;
  }
}

TEST(PrepackLinearTest, AnActivationStaysOutsideWhereTheProductIsReadElsewhere) {
  // The product is a graph output too, or read by another op: the activation runs after it.
  for (const std::string& text :
       {with_activation("aten::relu(%y)", ", %y"),
        std::string("graph(%x : f32[128,768]):\n"
                    "  %w : f32[3072,768] = prim::Constant() {index=0}\n"
                    "  %y : f32[128,3072] = aten::linear(%x, %w) {bias=None}\n"
                    "  %z : f32[128,3072] = aten::relu(%y)\n"
                    "  %s : f32[128,3072] = aten::add.Tensor(%y, %z) {alpha=1}\n"
                    "  return (%s)\n"),
        with_activation("aten::tanh(%y)")}) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 1);
    const std::string printed = ir::print_graph(*g);
    EXPECT_EQ(printed.find("activation="), std::string::npos) << printed;
    EXPECT_NE(printed.find(" = aten::"), std::string::npos) << printed;
  }
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

// A training step's products: the forward's linear on a weight that is a graph input, its
// backward's input gradient (dy w) and weight gradient (dy^T x, a transposed input).
const char* kTrainingProducts =
    "graph(%x : f32[8,256], %w : f32[128,256], %b : f32[128], %dy : f32[8,128]):\n"
    "  %y : f32[8,128] = aten::linear(%x, %w, %b)\n"
    "  %r : f32[8,128] = aten::relu(%y)\n"
    "  %dx : f32[8,256] = aten::mm(%dy, %w)\n"
    "  %dyt : f32[128,8]{1,128} = aten::permute(%dy) {dims=[1,0]}\n"
    "  %dw : f32[128,256] = aten::mm(%dyt, %x)\n"
    "  return (%r, %dx, %dw)\n";

TEST(PrepackLinearTest, WithItsOwnPrimitiveProductsOnWeightsThatChangeRunUnpacked) {
  auto g = ir::parse_graph(kTrainingProducts);
  EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true), 2);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[8,256], %w : f32[128,256], %b : f32[128], %dy : f32[8,128]):\n"
            "  %r : f32[8,128] = kiln::onednn_matmul(%x, %w, %b) {other_transposed=true, "
            "activation=\"relu\"}\n"
            "  %dx : f32[8,256] = kiln::onednn_matmul(%dy, %w) {bias=None, "
            "other_transposed=false}\n"
            "  %dyt : f32[128,8]{1,128} = aten::permute(%dy) {dims=[1,0]}\n"
            "  %dw : f32[128,256] = aten::mm(%dyt, %x)\n"
            "  return (%r, %dx, %dw)\n");
  // Without kiln's primitives, or under bf16 (whose products are the frozen ones), they stay.
  for (const bool bf16 : {false, true}) {
    auto kept = ir::parse_graph(kTrainingProducts);
    EXPECT_EQ(prepack_linear(*kept, /*own_primitive=*/bf16, bf16), 0);
    EXPECT_EQ(ir::print_graph(*kept), ir::print_graph(*ir::parse_graph(kTrainingProducts)));
  }
}

TEST(PrepackLinearTest, UnderBf16ALinearOfFewRowsReadsItsFrozenWeightAsBf16) {
  const char* row =
      "graph(%x : f32[1,512], %v : f32[8,512]):\n"
      "  %w : f32[256,512] = prim::Constant() {index=0}\n"
      "  %y : f32[1,256] = aten::linear(%x, %w) {bias=None}\n"
      "  %z : f32[1,8] = aten::linear(%x, %v) {bias=None}\n"
      "  return (%y, %z)\n";
  auto g = ir::parse_graph(row);
  EXPECT_EQ(prepack_linear(*g, /*own_primitive=*/true, /*bf16=*/true), 0);
  // The frozen weight goes through a cast that fold_constants computes; the one that is a graph
  // input (cast on every call, for nothing) and every linear under fp32 stay as they were.
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[1,512], %v : f32[8,512]):\n"
            "  %w : f32[256,512] = prim::Constant() {index=0}\n"
            "  %w_bf16 : bf16[256,512] = aten::_to_copy(%w) {dtype=15, layout=None, "
            "device=None, pin_memory=None, non_blocking=false, memory_format=None}\n"
            "  %y : f32[1,256] = aten::linear(%x, %w_bf16) {bias=None}\n"
            "  %z : f32[1,8] = aten::linear(%x, %v) {bias=None}\n"
            "  return (%y, %z)\n");
  auto fp32 = ir::parse_graph(row);
  EXPECT_EQ(prepack_linear(*fp32, /*own_primitive=*/true, /*bf16=*/false), 0);
  EXPECT_EQ(ir::print_graph(*fp32), ir::print_graph(*ir::parse_graph(row)));
}

}  // namespace
}  // namespace kiln
