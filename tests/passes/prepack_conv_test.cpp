#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/prepack_conv.h"

namespace kiln {
namespace {

// A channels-last convolution (as assign_layout leaves it) followed by `activation`.
std::string conv_then(const std::string& activation,
                      const std::string& input_strides = "{768,1,96,12}") {
  return "graph(%x : f32[1,12,8,8]" + input_strides +
         "):\n"
         "  %w : f32[16,12,3,3] = prim::Constant() {index=0}\n"
         "  %b : f32[16] = prim::Constant() {index=1}\n"
         "  %y : f32[1,16,8,8]{1024,1,128,16} = aten::conv2d(%x, %w, %b) {stride=[1,1], "
         "padding=[1,1], dilation=[1,1], groups=1}\n" +
         activation + "  return (%r)\n";
}

TEST(PrepackConvTest, AConvolutionAndItsReluBecomeOneOneDnnConvolutionOnAPackedWeight) {
  auto g = ir::parse_graph(conv_then("  %r : f32[1,16,8,8]{1024,1,128,16} = aten::relu(%y)\n"));
  EXPECT_EQ(prepack_conv(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[1,12,8,8]{768,1,96,12}):\n"
            "  %w : f32[16,12,3,3] = prim::Constant() {index=0}\n"
            "  %b : f32[16] = prim::Constant() {index=1}\n"
            "  %w_mkldnn : f32[16,12,3,3] = aten::to_mkldnn(%w) {dtype=None}\n"
            "  %w_packed : f32[16,12,3,3] = aten::mkldnn_reorder_conv2d_weight(%w_mkldnn) "
            "{padding=[1,1], stride=[1,1], dilation=[1,1], groups=1, input_size=[1,12,8,8]}\n"
            "  %r : f32[1,16,8,8]{1024,1,128,16} = mkldnn::_convolution_pointwise(%x, "
            "%w_packed, %b) {padding=[1,1], stride=[1,1], dilation=[1,1], groups=1, "
            "attr=\"relu\", scalars=[], algorithm=\"\"}\n"
            "  return (%r)\n");
}

TEST(PrepackConvTest, Relu6IsAHardtanhPostOpWithItsBounds) {
  auto g = ir::parse_graph(conv_then(
      "  %r : f32[1,16,8,8]{1024,1,128,16} = aten::hardtanh(%y) {min_val=0.0, max_val=6.0}\n"));
  EXPECT_EQ(prepack_conv(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("attr=\"hardtanh\", scalars=[0.0,6.0]"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("aten::hardtanh"), std::string::npos) << printed;
}

TEST(PrepackConvTest, AnActivationStaysWhenTheConvolutionHasOtherReaders) {
  auto g = ir::parse_graph(
      conv_then("  %a : f32[1,16,8,8]{1024,1,128,16} = aten::relu(%y)\n"
                "  %r : f32[1,16,8,8]{1024,1,128,16} = aten::add.Tensor(%a, %y) {alpha=1}\n"));
  EXPECT_EQ(prepack_conv(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("attr=\"none\""), std::string::npos) << printed;
  EXPECT_NE(printed.find("aten::relu(%y)"), std::string::npos) << printed;
}

// A [1, 12, 8, 8] convolution %y, then `residual` (which defines %i), their sum %s and `after`
// (which returns %r). %v, a weight that is a graph input, makes a convolution prepack_conv leaves.
std::string conv_add(const std::string& residual, const std::string& after, int groups = 1) {
  return "graph(%x : f32[1,12,8,8]{768,1,96,12}, %v : f32[12,12,1,1]):\n"
         "  %w : f32[12," +
         std::to_string(12 / groups) +
         ",3,3] = prim::Constant() {index=0}\n"
         "  %y : f32[1,12,8,8]{768,1,96,12} = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
         "padding=[1,1], dilation=[1,1], groups=" +
         std::to_string(groups) + "}\n" + residual +
         "  %s : f32[1,12,8,8]{768,1,96,12} = aten::add.Tensor(%i, %y) {alpha=1}\n" + after +
         "  return (%r)\n";
}

const char* const kResidualConv =
    "  %i : f32[1,12,8,8]{768,1,96,12} = aten::conv2d(%x, %v) {bias=None, stride=[1,1], "
    "padding=[0,0], dilation=[1,1], groups=1}\n";

TEST(PrepackConvTest, AResidualAddAndItsReluRunInsideTheConvolution) {
  // The other operand, another convolution's output, is computed after the convolution (as
  // ResNet's downsample path is), so the fused node takes the add's place.
  auto g = ir::parse_graph(
      conv_add(kResidualConv, "  %r : f32[1,12,8,8]{768,1,96,12} = aten::relu(%s)\n"));
  EXPECT_EQ(prepack_conv(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find(std::string(kResidualConv) + "  %w_mkldnn"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%r : f32[1,12,8,8]{768,1,96,12} = mkldnn::_convolution_pointwise.binary("
                         "%x, %i, %w_packed) {B=None, padding=[1,1], stride=[1,1], "
                         "dilation=[1,1], groups=1, binary_attr=\"add\", alpha=None, "
                         "unary_attr=\"relu\", unary_scalars=[], unary_algorithm=None}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("aten::add"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("aten::relu"), std::string::npos) << printed;
}

TEST(PrepackConvTest, AResidualThatCannotBeWrittenOverStaysOutsideTheConvolution) {
  // oneDNN's binary form copies a residual it cannot write over (a kernel's output lives in the
  // memory plan's arena; one read after the add lives on), and then costs more than the plain
  // convolution and an add kernel after it.
  const std::string scaled =
      "  %i : f32[1,12,8,8]{768,1,96,12} = aten::mul.Scalar(%x) {other=2.0}\n";
  const std::string relu = "  %r : f32[1,12,8,8]{768,1,96,12} = aten::relu(%s)\n";
  const std::string read_later =
      "  %t : f32[1,12,8,8]{768,1,96,12} = aten::relu(%s)\n"
      "  %r : f32[1,12,8,8]{768,1,96,12} = aten::add.Tensor(%t, %i) {alpha=1}\n";
  for (const auto& [residual, after] :
       {std::pair{scaled, relu}, std::pair{std::string(kResidualConv), read_later}}) {
    auto g = ir::parse_graph(conv_add(residual, after));
    EXPECT_EQ(prepack_conv(*g), 1);
    const std::string printed = ir::print_graph(*g);
    EXPECT_EQ(printed.find(".binary"), std::string::npos) << printed;
    EXPECT_NE(printed.find("aten::add.Tensor(%i, %y)"), std::string::npos) << printed;
  }
}

TEST(PrepackConvTest, AHardtanhAfterAResidualAddStaysOutsideTheConvolution) {
  // oneDNN's binary form takes relu alone after its add: anything else is rejected when it runs.
  for (const int groups : {1, 3}) {
    auto g = ir::parse_graph(conv_add(
        kResidualConv,
        "  %r : f32[1,12,8,8]{768,1,96,12} = aten::hardtanh(%s) {min_val=-1.0, max_val=1.0}\n",
        groups));
    EXPECT_EQ(prepack_conv(*g), 1);
    const std::string printed = ir::print_graph(*g);
    EXPECT_NE(printed.find("binary_attr=\"add\", alpha=None, unary_attr=None"), std::string::npos)
        << printed;
    EXPECT_NE(printed.find("aten::hardtanh(%s)"), std::string::npos) << printed;
  }
}

TEST(PrepackConvTest, AResidualAddOverOnePixelPerImageStaysOutsideTheConvolution) {
  // oneDNN's binary form rejects a [N, C, 1, 1] output when it runs.
  auto g = ir::parse_graph(
      "graph(%x : f32[2,12,1,1]{12,1,12,12}):\n"
      "  %w : f32[12,12,1,1] = prim::Constant() {index=0}\n"
      "  %y : f32[2,12,1,1]{12,1,12,12} = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
      "padding=[0,0], dilation=[1,1], groups=1}\n"
      "  %r : f32[2,12,1,1]{12,1,12,12} = aten::add.Tensor(%y, %x) {alpha=1}\n"
      "  return (%r)\n");
  EXPECT_EQ(prepack_conv(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_EQ(printed.find(".binary"), std::string::npos) << printed;
  EXPECT_NE(printed.find("aten::add.Tensor"), std::string::npos) << printed;
}

// SKNet's and Res2Net's branches: a convolution of a channel slice of a channels-last tensor
// (not dense). Only kiln's own primitive, which copies such an input itself, takes it.
TEST(PrepackConvTest, AConvolutionOfAChannelSliceIsTakenOnlyForKilnsOwnPrimitive) {
  const std::string text = conv_then("  %r : f32[1,16,8,8]{1024,1,128,16} = aten::relu(%y)\n",
                                     "{1536,1,192,24}");  // channels 0-11 of 24
  for (bool own : {true, false}) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(prepack_conv(*g, /*residual_anywhere=*/own), own ? 1 : 0) << ir::print_graph(*g);
  }
}

TEST(PrepackConvTest, ConvolutionsThatStay) {
  const std::vector<std::string> stays = {
      // NCHW input: with a packed weight oneDNN would return channels-last
      conv_then("  %r : f32[1,16,8,8]{1024,1,128,16} = aten::relu(%y)\n", ""),
      // the weight is a graph input
      "graph(%x : f32[1,12,8,8]{768,1,96,12}, %w : f32[16,12,3,3]):\n"
      "  %r : f32[1,16,8,8]{1024,1,128,16} = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  return (%r)\n",
      // transposed
      "graph(%x : f32[1,12,8,8]{768,1,96,12}):\n"
      "  %w : f32[12,16,3,3] = prim::Constant() {index=0}\n"
      "  %r : f32[1,16,10,10]{1600,1,160,16} = aten::convolution(%x, %w) {bias=None, "
      "stride=[1,1], padding=[0,0], dilation=[1,1], transposed=true, output_padding=[0,0], "
      "groups=1}\n"
      "  return (%r)\n",
  };
  for (const std::string& text : stays) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(prepack_conv(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*ir::parse_graph(text)));
  }
}

}  // namespace
}  // namespace kiln
