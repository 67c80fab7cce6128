#include <string>

#include <gtest/gtest.h>

#include "passes/fold_batch_norm.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

const char* kConvBatchNorm =
    "graph(%x : f32[1,3,8,8]):\n"
    "  %w : f32[4,3,3,3] = prim::Constant() {index=0}\n"
    "  %b : f32[4] = prim::Constant() {index=1}\n"
    "  %g : f32[4] = prim::Constant() {index=2}\n"
    "  %beta : f32[4] = prim::Constant() {index=3}\n"
    "  %m : f32[4] = prim::Constant() {index=4}\n"
    "  %v : f32[4] = prim::Constant() {index=5}\n"
    "  %y : f32[1,4,6,6] = aten::conv2d(%x, %w, %b) {stride=[1,1], padding=[0,0], "
    "dilation=[1,1], groups=1}\n"
    "  %z : f32[1,4,6,6] = aten::batch_norm(%y, %g, %beta, %m, %v) {training=false, "
    "momentum=0.1, eps=1e-05, cudnn_enabled=true}\n"
    "  return (%z)\n";

TEST(FoldBatchNormTest, FoldsIntoTheConvolutionsWeightAndBias) {
  auto g = ir::parse_graph(kConvBatchNorm);
  EXPECT_EQ(fold_batch_norm(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_EQ(printed.find("aten::batch_norm"), std::string::npos) << printed;
  // scale = gamma * rsqrt(var + eps), as [4,1,1,1] for the weight
  EXPECT_NE(printed.find("aten::add.Scalar(%v) {other=1.0000000000000001e-05, alpha=1}"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("aten::view("), std::string::npos);
  EXPECT_NE(printed.find("f32[4,1,1,1]"), std::string::npos);
  // bias = (b - mean) * scale + beta
  EXPECT_NE(printed.find("aten::sub.Tensor(%b, %m) {alpha=1}"), std::string::npos) << printed;
  // the new conv writes the batch norm's value
  EXPECT_NE(printed.find("  %z : f32[1,4,6,6] = aten::conv2d(%x, "), std::string::npos) << printed;
  EXPECT_NE(printed.find("{stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}"),
            std::string::npos);
}

TEST(FoldBatchNormTest, FoldsIntoATracedConvolution) {
  // torch.jit.trace records aten::_convolution, with its extra flags as attributes.
  std::string text = kConvBatchNorm;
  const std::string conv2d =
      "aten::conv2d(%x, %w, %b) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}";
  text.replace(text.find(conv2d), conv2d.size(),
               "aten::_convolution(%x, %w, %b) {stride=[1,1], padding=[0,0], dilation=[1,1], "
               "transposed=false, output_padding=[0,0], groups=1, benchmark=false, "
               "deterministic=false, cudnn_enabled=true, allow_tf32=true}");
  auto g = ir::parse_graph(text);
  EXPECT_EQ(fold_batch_norm(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_EQ(printed.find("aten::batch_norm"), std::string::npos) << printed;
  EXPECT_NE(printed.find("  %z : f32[1,4,6,6] = aten::_convolution(%x, "), std::string::npos)
      << printed;
}

TEST(FoldBatchNormTest, ATrainingBatchNormStays) {
  std::string text = kConvBatchNorm;
  text.replace(text.find("training=false"), 14, "training=true");
  auto g = ir::parse_graph(text);
  EXPECT_EQ(fold_batch_norm(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*ir::parse_graph(text)));
}

TEST(FoldBatchNormTest, AConvolutionReadElsewhereStays) {
  std::string text = kConvBatchNorm;
  text.replace(text.find("return (%z)"), 11, "return (%z, %y)");
  auto g = ir::parse_graph(text);
  EXPECT_EQ(fold_batch_norm(*g), 0);
}

TEST(FoldBatchNormTest, WeightsThatAreNotConstantsStay) {
  const std::string text =
      "graph(%x : f32[2,8], %w : f32[4,8], %g : f32[4], %beta : f32[4], %m : f32[4], "
      "%v : f32[4]):\n"
      "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
      "  %z : f32[2,4] = aten::batch_norm(%y, %g, %beta, %m, %v) {training=false, "
      "momentum=0.1, eps=1e-05, cudnn_enabled=true}\n"
      "  return (%z)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(fold_batch_norm(*g), 0);
}

TEST(FoldBatchNormTest, FoldsIntoALinearWithoutBias) {
  auto g = ir::parse_graph(
      "graph(%x : f32[2,8]):\n"
      "  %w : f32[4,8] = prim::Constant() {index=0}\n"
      "  %m : f32[4] = prim::Constant() {index=1}\n"
      "  %v : f32[4] = prim::Constant() {index=2}\n"
      "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
      "  %z : f32[2,4] = aten::batch_norm(%y, %m, %v) {weight=None, bias=None, training=false, "
      "momentum=0.1, eps=1e-05, cudnn_enabled=true}\n"
      "  return (%z)\n");
  EXPECT_EQ(fold_batch_norm(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("aten::neg(%m)"), std::string::npos) << printed;
  EXPECT_NE(printed.find("f32[4,1] = aten::view("), std::string::npos) << printed;
  EXPECT_NE(printed.find("  %z : f32[2,4] = aten::linear(%x, "), std::string::npos) << printed;
}

}  // namespace
}  // namespace kiln
