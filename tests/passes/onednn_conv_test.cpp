// onednn_conv: prepack_conv's oneDNN convolutions that become kiln::onednn_conv2d, with the weight
// packing left for fold_constants and ATen's packing chain removed; and prepack_conv's
// residual_anywhere, which that makes possible.
#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/onednn_conv.h"
#include "passes/prepack_conv.h"
#include "passes/winograd_conv.h"

namespace kiln {
namespace {

// The channels-last type of [1, c, side, side].
std::string cl(int64_t c, int64_t side = 8) {
  return "f32[1," + std::to_string(c) + "," + std::to_string(side) + "," + std::to_string(side) +
         "]{" + std::to_string(c * side * side) + ",1," + std::to_string(c * side) + "," +
         std::to_string(c) + "}";
}

std::string rewritten(const std::string& text, int expected, bool residual_anywhere = true) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(prepack_conv(*g, residual_anywhere), 1) << text;
  winograd_conv(*g);
  EXPECT_EQ(onednn_conv(*g), expected) << ir::print_graph(*g);
  return ir::print_graph(*g);
}

TEST(OneDnnConvTest, AConvolutionAndItsReluBecomeOneOwnConvolution) {
  const std::string printed =
      rewritten("graph(%x : " + cl(16) +
                    "):\n"
                    "  %w : f32[24,16,1,1] = prim::Constant() {index=0}\n"
                    "  %b : f32[24] = prim::Constant() {index=1}\n"
                    "  %y : " +
                    cl(24) +
                    " = aten::conv2d(%x, %w, %b) {stride=[1,1], padding=[0,0], "
                    "dilation=[1,1], groups=1}\n"
                    "  %r : " +
                    cl(24) +
                    " = aten::relu(%y)\n"
                    "  return (%r)\n",
                1);
  EXPECT_EQ(printed,
            "graph(%x : " + cl(16) +
                "):\n"
                "  %w : f32[24,16,1,1] = prim::Constant() {index=0}\n"
                "  %b : f32[24] = prim::Constant() {index=1}\n"
                "  %w_onednn : f32[400] = kiln::onednn_conv2d_weight(%w) {input_size=[1,16,8,8], "
                "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, bias=true, residual=false, "
                "activation=\"relu\", scalars=[]}\n"
                "  %r : " +
                cl(24) +
                " = kiln::onednn_conv2d(%x, %w, %w_onednn, %b) {other=None, "
                "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, activation=\"relu\", "
                "scalars=[]}\n"
                "  return (%r)\n");
}

TEST(OneDnnConvTest, ADepthwiseConvolutionKeepsItsClampBounds) {
  const std::string printed =
      rewritten("graph(%x : " + cl(32) +
                    "):\n"
                    "  %w : f32[32,1,3,3] = prim::Constant() {index=0}\n"
                    "  %y : " +
                    cl(32) +
                    " = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[1,1], "
                    "dilation=[1,1], groups=32}\n"
                    "  %r : " +
                    cl(32) +
                    " = aten::hardtanh(%y) {min_val=0.0, max_val=6.0}\n"
                    "  return (%r)\n",
                1);
  EXPECT_NE(printed.find("kiln::onednn_conv2d(%x, %w, %w_onednn) {bias=None, other=None, "
                         "stride=[1,1], padding=[1,1], dilation=[1,1], groups=32, "
                         "activation=\"hardtanh\", scalars=[0.0,6.0]}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("mkldnn"), std::string::npos) << printed;
}

// A residual whose other operand is a kernel's output (here a sigmoid): ATen's op would copy it,
// kiln's reads it where it lies, so prepack_conv takes it when told residual_anywhere.
std::string residual_graph(int64_t side) {
  return "graph(%x : " + cl(16, side) + ", %z : " + cl(16, side) +
         "):\n"
         "  %w : f32[16,16,1,1] = prim::Constant() {index=0}\n"
         "  %i : " +
         cl(16, side) +
         " = aten::sigmoid(%z)\n"
         "  %y : " +
         cl(16, side) +
         " = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
         "padding=[0,0], dilation=[1,1], groups=1}\n"
         "  %s : " +
         cl(16, side) +
         " = aten::add.Tensor(%y, %i) {alpha=1}\n"
         "  %r : " +
         cl(16, side) +
         " = aten::relu(%s)\n"
         "  return (%r)\n";
}

TEST(OneDnnConvTest, AResidualFromAnywhereBecomesTheOtherOperand) {
  for (int64_t side : {8, 1}) {  // one pixel too: ATen's binary form cannot describe it
    const std::string printed = rewritten(residual_graph(side), 1);
    EXPECT_NE(printed.find("kiln::onednn_conv2d(%x, %w, %w_onednn, %i) {bias=None, stride="),
              std::string::npos)
        << printed;
    EXPECT_NE(printed.find("residual=true, activation=\"relu\""), std::string::npos) << printed;
    EXPECT_EQ(printed.find("aten::add.Tensor"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("aten::relu"), std::string::npos) << printed;
  }
}

TEST(OneDnnConvTest, WithoutResidualAnywhereSuchAnAddStaysOutside) {
  const std::string printed = rewritten(residual_graph(8), 1, /*residual_anywhere=*/false);
  EXPECT_NE(printed.find("aten::add.Tensor"), std::string::npos) << printed;
  EXPECT_NE(printed.find("residual=false"), std::string::npos) << printed;
}

TEST(OneDnnConvTest, LeavesWinogradsConvolutionsAlone) {
  const std::string printed =
      rewritten("graph(%x : " + cl(64) +
                    "):\n"
                    "  %w : f32[64,64,3,3] = prim::Constant() {index=0}\n"
                    "  %r : " +
                    cl(64) +
                    " = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[1,1], "
                    "dilation=[1,1], groups=1}\n"
                    "  return (%r)\n",
                0);
  EXPECT_NE(printed.find("kiln::winograd_conv2d"), std::string::npos) << printed;
}

}  // namespace
}  // namespace kiln
