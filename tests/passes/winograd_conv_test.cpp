// winograd_conv: prepack_conv's oneDNN convolutions that become kiln::winograd_conv2d, with the
// filter transform left for fold_constants and the packing chain removed.
#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/prepack_conv.h"
#include "passes/winograd_conv.h"

namespace kiln {
namespace {

// A channels-last [1, C, 8, 8] -> [1, K, 8, 8] convolution with the given filter, stride and
// padding, followed by `rest` (which returns %r).
std::string conv(int64_t channels, int64_t out_channels, int64_t kernel, const std::string& stride,
                 const std::string& rest, int64_t side = 8) {
  const auto cl = [&](int64_t c) {
    return "f32[1," + std::to_string(c) + "," + std::to_string(side) + "," + std::to_string(side) +
           "]{" + std::to_string(c * side * side) + ",1," + std::to_string(c * side) + "," +
           std::to_string(c) + "}";
  };
  return "graph(%x : " + cl(channels) + "):\n  %w : f32[" + std::to_string(out_channels) + "," +
         std::to_string(channels) + "," + std::to_string(kernel) + "," + std::to_string(kernel) +
         "] = prim::Constant() {index=0}\n  %b : f32[" + std::to_string(out_channels) +
         "] = prim::Constant() {index=1}\n  %y : " + cl(out_channels) +
         " = aten::conv2d(%x, %w, %b) {stride=" + stride +
         ", padding=[1,1], dilation=[1,1], groups=1}\n" + rest + "  return (%r)\n";
}

std::string rewritten(const std::string& text, int expected) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(prepack_conv(*g), 1) << text;
  EXPECT_EQ(winograd_conv(*g), expected) << ir::print_graph(*g);
  return ir::print_graph(*g);
}

TEST(WinogradConvTest, A3x3ConvolutionAndItsReluBecomeOneWinogradConvolution) {
  EXPECT_EQ(
      rewritten(conv(64, 80, 3, "[1,1]", "  %r : f32[1,80,8,8]{5120,1,640,80} = aten::relu(%y)\n"),
                1),
      "graph(%x : f32[1,64,8,8]{4096,1,512,64}):\n"
      "  %w : f32[80,64,3,3] = prim::Constant() {index=0}\n"
      "  %b : f32[80] = prim::Constant() {index=1}\n"
      "  %w_winograd : f32[36,64,80] = kiln::winograd_weight(%w)\n"
      "  %r : f32[1,80,8,8]{5120,1,640,80} = kiln::winograd_conv2d(%x, %w, %w_winograd, %b) "
      "{other=None, activation=\"relu\"}\n"
      "  return (%r)\n");
}

TEST(WinogradConvTest, AResidualAddBecomesTheOtherOperand) {
  const std::string printed = rewritten(
      "graph(%x : f32[1,64,8,8]{4096,1,512,64}, %v : f32[64,64,1,1]):\n"
      "  %w : f32[64,64,3,3] = prim::Constant() {index=0}\n"
      "  %y : f32[1,64,8,8]{4096,1,512,64} = aten::conv2d(%x, %w) {bias=None, "
      "stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}\n"
      "  %i : f32[1,64,8,8]{4096,1,512,64} = aten::conv2d(%x, %v) {bias=None, "
      "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}\n"
      "  %s : f32[1,64,8,8]{4096,1,512,64} = aten::add.Tensor(%i, %y) {alpha=1}\n"
      "  %r : f32[1,64,8,8]{4096,1,512,64} = aten::relu(%s)\n"
      "  return (%r)\n",
      1);
  EXPECT_NE(printed.find("%r : f32[1,64,8,8]{4096,1,512,64} = kiln::winograd_conv2d(%x, %w, "
                         "%w_winograd, %i) {bias=None, activation=\"relu\"}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("mkldnn"), std::string::npos) << printed;
}

TEST(WinogradConvTest, ConvolutionsThatStayOnOneDnn) {
  const std::string relu6 =
      "  %r : f32[1,64,8,8]{4096,1,512,64} = aten::hardtanh(%y) {min_val=0.0, max_val=6.0}\n";
  // stride 2: not F(4x4, 3x3)'s sliding window
  auto strided = ir::parse_graph(
      "graph(%x : f32[1,64,8,8]{4096,1,512,64}):\n"
      "  %w : f32[64,64,3,3] = prim::Constant() {index=0}\n"
      "  %r : f32[1,64,4,4]{1024,1,256,64} = aten::conv2d(%x, %w) {bias=None, stride=[2,2], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  return (%r)\n");
  const std::vector<std::string> stays = {
      // a 5x5 filter
      "graph(%x : f32[1,64,8,8]{4096,1,512,64}):\n"
      "  %w : f32[64,64,5,5] = prim::Constant() {index=0}\n"
      "  %r : f32[1,64,6,6]{2304,1,384,64} = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  return (%r)\n",
      conv(64, 64, 3, "[1,1]", relu6),
      // 32 input channels: the transforms cost more than the GEMMs save
      conv(32, 64, 3, "[1,1]", "  %r : f32[1,64,8,8]{4096,1,512,64} = aten::relu(%y)\n"),
      // 36 x 512 x 512 transformed filter floats: past the 16 MB the rule allows
      conv(512, 512, 3, "[1,1]", "  %r : f32[1,512,8,8]{32768,1,4096,512} = aten::relu(%y)\n"),
  };
  for (const std::string& text : stays) {
    auto g = ir::parse_graph(text);
    prepack_conv(*g);
    const std::string before = ir::print_graph(*g);
    EXPECT_EQ(winograd_conv(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), before);
  }
  EXPECT_EQ(prepack_conv(*strided), 1);
  EXPECT_EQ(winograd_conv(*strided), 0);
}

TEST(WinogradConvTest, ABatchWhoseTransformedTilesPassTheLimitStaysOnOneDnn) {
  // 64 -> 64 channels over [8, 64, 56, 56]: 36 x 1568 tiles x 128 floats is 28.9 MB (8 MB is
  // the limit below 128 channels).
  const std::string text =
      "graph(%x : f32[8,64,56,56]{200704,1,3584,64}):\n"
      "  %w : f32[64,64,3,3] = prim::Constant() {index=0}\n"
      "  %r : f32[8,64,56,56]{200704,1,3584,64} = aten::conv2d(%x, %w) {bias=None, "
      "stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}\n"
      "  return (%r)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(prepack_conv(*g), 1);
  EXPECT_EQ(winograd_conv(*g), 0);
  // At batch 1 (1568 / 8 tiles, 3.6 MB) it fits.
  std::string one = text;
  for (size_t at = one.find("[8,64"); at != std::string::npos; at = one.find("[8,64", at))
    one.replace(at, 5, "[1,64");
  auto g1 = ir::parse_graph(one);
  EXPECT_EQ(prepack_conv(*g1), 1);
  EXPECT_EQ(winograd_conv(*g1), 1);
}

TEST(WinogradConvTest, AFilterPast4MbNeedsAtLeast64Tiles) {
  // 256 -> 256 channels: a 9.4 MB transformed filter, read from memory on every call. At batch 1
  // over 14x14 (16 tiles) oneDNN stays; at batch 8 (128 tiles) Winograd takes it.
  const auto taken = [](int64_t batch) {
    const std::string t = "f32[" + std::to_string(batch) + ",256,14,14]{50176,1,3584,256}";
    auto g = ir::parse_graph("graph(%x : " + t +
                             "):\n"
                             "  %w : f32[256,256,3,3] = prim::Constant() {index=0}\n"
                             "  %r : " +
                             t +
                             " = aten::conv2d(%x, %w) {bias=None, stride=[1,1], padding=[1,1], "
                             "dilation=[1,1], groups=1}\n"
                             "  return (%r)\n");
    EXPECT_EQ(prepack_conv(*g), 1);
    return winograd_conv(*g);
  };
  EXPECT_EQ(taken(1), 0);
  EXPECT_EQ(taken(8), 1);
}

}  // namespace
}  // namespace kiln
