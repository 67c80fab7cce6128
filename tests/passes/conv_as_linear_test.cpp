#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/conv_as_linear.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

// A squeeze-and-excitation gate's first convolution: 960 channel means in, 240 out.
const char* kGate =
    "graph(%x : f32[1,960,1,1]{960,1,960,960}):\n"
    "  %w : f32[240,960,1,1] = prim::Constant() {index=0}\n"
    "  %b : f32[240] = prim::Constant() {index=1}\n"
    "  %y : f32[1,240,1,1]{240,1,240,240} = aten::convolution(%x, %w, %b) {stride=[1,1], "
    "padding=[0,0], dilation=[1,1], transposed=false, output_padding=[0,0], groups=1}\n"
    "  %r : f32[1,240,1,1]{240,1,240,240} = aten::relu(%y)\n"
    "  return (%r)\n";

TEST(ConvAsLinearTest, AOnePixelConvolutionIsALinearBetweenViews) {
  auto g = ir::parse_graph(kGate);
  EXPECT_EQ(conv_as_linear(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[1,960,1,1]{960,1,960,960}):\n"
            "  %w : f32[240,960,1,1] = prim::Constant() {index=0}\n"
            "  %b : f32[240] = prim::Constant() {index=1}\n"
            "  %x_rows : f32[1,960] = aten::view(%x) {size=[1,960]}\n"
            "  %w_rows : f32[240,960] = aten::view(%w) {size=[240,960]}\n"
            "  %y_rows : f32[1,240] = aten::linear(%x_rows, %w_rows, %b)\n"
            "  %y : f32[1,240,1,1]{240,1,240,240} = aten::view(%y_rows) {size=[1,240,1,1]}\n"
            "  %r : f32[1,240,1,1]{240,1,240,240} = aten::relu(%y)\n"
            "  return (%r)\n");
}

TEST(ConvAsLinearTest, ABiasFreeConvolutionOfABatchInAnyLayout) {
  auto g = ir::parse_graph(
      "graph(%x : f32[8,32,1,1]):\n"
      "  %w : f32[120,32,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[8,120,1,1] = aten::conv2d(%x, %w) {bias=None, stride=[2,2], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  return (%y)\n");
  EXPECT_EQ(conv_as_linear(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("%y_rows : f32[8,120] = aten::linear(%x_rows, %w_rows) {bias=None}"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("%y : f32[8,120,1,1] = aten::view("), std::string::npos) << printed;
}

TEST(ConvAsLinearTest, ConvolutionsThatSeeMoreThanOnePixelStay) {
  const std::vector<std::string> stays = {
      // a 2x2 image
      "graph(%x : f32[1,16,2,2]):\n"
      "  %w : f32[8,16,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[1,8,2,2] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  return (%y)\n",
      // padding: a 3x3 output, its border the bias alone
      "graph(%x : f32[1,16,1,1]):\n"
      "  %w : f32[8,16,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[1,8,3,3] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=1}\n"
      "  return (%y)\n",
      // groups
      "graph(%x : f32[1,16,1,1]):\n"
      "  %w : f32[16,4,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[1,16,1,1] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=4}\n"
      "  return (%y)\n",
      // the weight is a graph input (training): not frozen
      "graph(%x : f32[1,16,1,1], %w : f32[8,16,1,1]):\n"
      "  %y : f32[1,8,1,1] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  return (%y)\n",
      // float64
      "graph(%x : f64[1,16,1,1]):\n"
      "  %w : f64[8,16,1,1] = prim::Constant() {index=0}\n"
      "  %y : f64[1,8,1,1] = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  return (%y)\n",
      // transposed
      "graph(%x : f32[1,16,1,1]):\n"
      "  %w : f32[16,8,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[1,8,1,1] = aten::convolution(%x, %w) {bias=None, stride=[1,1], "
      "padding=[0,0], dilation=[1,1], transposed=true, output_padding=[0,0], groups=1}\n"
      "  return (%y)\n",
  };
  for (const std::string& text : stays) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(conv_as_linear(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*ir::parse_graph(text)));
  }
}

}  // namespace
}  // namespace kiln
