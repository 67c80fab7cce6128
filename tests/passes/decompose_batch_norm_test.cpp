#include <string>

#include <gtest/gtest.h>

#include "passes/decompose_batch_norm.h"
#include "passes/fold_batch_norm.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/pipeline.h"

namespace kiln {
namespace {

// A batch norm after an add: nothing to fold it into.
const char* kAddBatchNorm =
    "graph(%x : f32[2,4,3,3], %y : f32[2,4,3,3]):\n"
    "  %g : f32[4] = prim::Constant() {index=0}\n"
    "  %beta : f32[4] = prim::Constant() {index=1}\n"
    "  %m : f32[4] = prim::Constant() {index=2}\n"
    "  %v : f32[4] = prim::Constant() {index=3}\n"
    "  %s : f32[2,4,3,3] = aten::add.Tensor(%x, %y) {alpha=1}\n"
    "  %z : f32[2,4,3,3] = aten::batch_norm(%s, %g, %beta, %m, %v) {training=false, "
    "momentum=0.1, eps=1e-05, cudnn_enabled=true}\n"
    "  return (%z)\n";

std::string decomposed(const std::string& text, int expected) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(decompose_batch_norm(*g), expected);
  return ir::print_graph(*g);
}

TEST(DecomposeBatchNormTest, BecomesAMultiplyAndAnAddPerChannel) {
  const std::string printed = decomposed(kAddBatchNorm, 1);
  EXPECT_EQ(printed.find("aten::batch_norm"), std::string::npos) << printed;
  // scale = rsqrt(var + eps) * gamma; shift = beta - mean * scale; both viewed as [4,1,1]
  EXPECT_NE(printed.find("aten::add.Scalar(%v) {other=1.0000000000000001e-05, alpha=1}"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("aten::rsqrt("), std::string::npos) << printed;
  EXPECT_NE(printed.find("aten::sub.Tensor(%beta, "), std::string::npos) << printed;
  EXPECT_NE(printed.find("f32[4,1,1] = aten::view("), std::string::npos) << printed;
  EXPECT_NE(printed.find("{size=[4,1,1]}"), std::string::npos) << printed;
  // x * scale + shift writes the batch norm's value, after the add that feeds it
  EXPECT_NE(printed.find("f32[2,4,3,3] = aten::mul.Tensor(%s, "), std::string::npos) << printed;
  EXPECT_NE(printed.find("  %z : f32[2,4,3,3] = aten::add.Tensor("), std::string::npos) << printed;
  EXPECT_LT(printed.find("aten::add.Tensor(%x, %y)"), printed.find("aten::mul.Tensor(%s, "));
}

TEST(DecomposeBatchNormTest, ATwoDimensionalInputNeedsNoView) {
  const std::string text =
      "graph(%x : f32[5,4]):\n"
      "  %m : f32[4] = prim::Constant() {index=0}\n"
      "  %v : f32[4] = prim::Constant() {index=1}\n"
      "  %z : f32[5,4] = aten::batch_norm(%x, %m, %v) {weight=None, bias=None, training=false, "
      "momentum=0.1, eps=0.001, cudnn_enabled=true}\n"
      "  return (%z)\n";
  const std::string printed = decomposed(text, 1);
  EXPECT_EQ(printed.find("aten::view("), std::string::npos) << printed;
  // no gamma: scale is rsqrt(var + eps); no beta: shift is -(mean * scale)
  EXPECT_NE(printed.find("aten::neg("), std::string::npos) << printed;
  EXPECT_NE(printed.find("aten::mul.Tensor(%x, "), std::string::npos) << printed;
}

TEST(DecomposeBatchNormTest, ATrainingBatchNormStays) {
  std::string text = kAddBatchNorm;
  text.replace(text.find("training=false"), 14, "training=true");
  EXPECT_EQ(decomposed(text, 0), ir::print_graph(*ir::parse_graph(text)));
}

TEST(DecomposeBatchNormTest, StatisticsThatAreNotConstantsStay) {
  std::string text = kAddBatchNorm;
  text.replace(text.find("  %v : f32[4] = prim::Constant() {index=3}\n"), 44, "");
  text.replace(text.find("%y : f32[2,4,3,3])"), 18, "%y : f32[2,4,3,3], %v : f32[4])");
  decomposed(text, 0);
}

TEST(DecomposeBatchNormTest, HalfPrecisionStays) {
  // ATen normalizes float16 in float32 and rounds once; x * scale + shift would round twice.
  std::string text = kAddBatchNorm;
  for (size_t at; (at = text.find("f32[2,4,3,3]")) != std::string::npos;)
    text.replace(at, 3, "f16");
  decomposed(text, 0);
}

TEST(DecomposeBatchNormTest, AConvolutionsBatchNormIsFoldedNotDecomposed) {
  const std::string text =
      "graph(%x : f32[1,3,8,8]):\n"
      "  %w : f32[4,3,3,3] = prim::Constant() {index=0}\n"
      "  %m : f32[4] = prim::Constant() {index=1}\n"
      "  %v : f32[4] = prim::Constant() {index=2}\n"
      "  %y : f32[1,4,6,6] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  %z : f32[1,4,6,6] = aten::batch_norm(%y, %m, %v) {weight=None, bias=None, "
      "training=false, momentum=0.1, eps=1e-05, cudnn_enabled=true}\n"
      "  return (%z)\n";
  const auto& names = pipeline_pass_names();
  EXPECT_LT(std::find(names.begin(), names.end(), "fold_batch_norm"),
            std::find(names.begin(), names.end(), "decompose_batch_norm"));
  auto g = ir::parse_graph(text);
  EXPECT_EQ(fold_batch_norm(*g), 1);
  EXPECT_EQ(decompose_batch_norm(*g), 0);
  EXPECT_EQ(ir::print_graph(*g).find("aten::mul.Tensor(%y"), std::string::npos);
}

}  // namespace
}  // namespace kiln
