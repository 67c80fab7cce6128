#include <string>

#include <gtest/gtest.h>

#include "passes/eliminate_dead_code.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/merge_conv_branches.h"

namespace kiln {
namespace {

std::string merged(const std::string& text, int expected) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(merge_conv_branches(*g), expected);
  eliminate_dead_code(*g);
  return ir::print_graph(*g);
}

// The graph after the pass, when it should change nothing (no dead-code elimination after it).
std::string after_pass(const std::string& text) {
  auto g = ir::parse_graph(text);
  EXPECT_EQ(merge_conv_branches(*g), 0);
  return ir::print_graph(*g);
}

// RepVGG's block before its batch norms' identity: a 3x3 and a 1x1 branch of one input.
TEST(MergeConvBranchesTest, ThreeByThreeAndOneByOneAreOneConvolution) {
  const std::string out = merged(
      "graph(%x : f32[1,8,6,6]):\n"
      "  %w3 : f32[8,8,3,3] = prim::Constant() {index=0}\n"
      "  %b3 : f32[8] = prim::Constant() {index=1}\n"
      "  %w1 : f32[8,8,1,1] = prim::Constant() {index=2}\n"
      "  %a : f32[1,8,6,6] = aten::conv2d(%x, %w3, %b3) {stride=[1,1], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  %b : f32[1,8,6,6] = aten::conv2d(%x, %w1) {bias=None, stride=[1,1], "
      "padding=[0,0], dilation=[1,1], groups=1}\n"
      "  %y : f32[1,8,6,6] = aten::add.Tensor(%b, %a) {alpha=1}\n"
      "  return (%y)\n",
      1);
  // %w1 is added to the centre of %w3: sliced down to it, summed, scattered back.
  for (const char* expected :
       {"f32[8,8,1,3]{72,9,3,1} = aten::slice.Tensor(%w3) {dim=2, start=1, end=2, step=1}",
        "f32[8,8,1,1]{72,9,3,1} = aten::slice.Tensor(", "{dim=3, start=1, end=2, step=1}",
        "f32[8,8,1,1] = aten::add.Tensor(", ", %w1) {alpha=1}",
        "f32[8,8,1,3] = aten::slice_scatter(", "f32[8,8,3,3] = aten::slice_scatter(%w3, ",
        "%y : f32[1,8,6,6] = aten::conv2d(%x, ",
        ", %b3) {stride=[1,1], padding=[1,1], "
        "dilation=[1,1], groups=1}"}) {
    EXPECT_NE(out.find(expected), std::string::npos) << expected << "\n" << out;
  }
  EXPECT_EQ(out.find("%b : "), std::string::npos) << out;
}

// MobileOne's over-parameterized depthwise branches: three 3x3 convolutions summed, pairwise.
TEST(MergeConvBranchesTest, ThreeBranchesMergePairwise) {
  const std::string out = merged(
      "graph(%x : f32[1,4,5,5]):\n"
      "  %w0 : f32[4,1,3,3] = prim::Constant() {index=0}\n"
      "  %w1 : f32[4,1,3,3] = prim::Constant() {index=1}\n"
      "  %w2 : f32[4,1,3,3] = prim::Constant() {index=2}\n"
      "  %b : f32[4] = prim::Constant() {index=3}\n"
      "  %c0 : f32[1,4,5,5] = aten::conv2d(%x, %w0, %b) {stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=4}\n"
      "  %c1 : f32[1,4,5,5] = aten::conv2d(%x, %w1, %b) {stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=4}\n"
      "  %c2 : f32[1,4,5,5] = aten::conv2d(%x, %w2, %b) {stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=4}\n"
      "  %s : f32[1,4,5,5] = aten::add.Tensor(%c0, %c1) {alpha=1}\n"
      "  %y : f32[1,4,5,5] = aten::add.Tensor(%s, %c2) {alpha=1}\n"
      "  return (%y)\n",
      2);
  EXPECT_EQ(out.find("aten::add.Tensor(%s"), std::string::npos) << out;
  size_t convs = 0;
  for (size_t at = out.find("aten::conv2d"); at != std::string::npos;
       at = out.find("aten::conv2d", at + 1)) {
    ++convs;
  }
  EXPECT_EQ(convs, 1u) << out;
}

// MobileOne's block: the identity first, then the 1x1 branch, then the kxk branches, one add at a
// time. The convolutions among the sum's terms merge; the identity stays a term.
TEST(MergeConvBranchesTest, ConvolutionsAmongAChainOfAddsMerge) {
  const std::string out = merged(
      "graph(%x : f32[1,4,5,5]):\n"
      "  %w1 : f32[4,4,1,1] = prim::Constant() {index=0}\n"
      "  %w3 : f32[4,4,3,3] = prim::Constant() {index=1}\n"
      "  %v3 : f32[4,4,3,3] = prim::Constant() {index=2}\n"
      "  %s : f32[1,4,5,5] = aten::conv2d(%x, %w1) {bias=None, stride=[1,1], "
      "padding=[0,0], dilation=[1,1], groups=1}\n"
      "  %t0 : f32[1,4,5,5] = aten::add.Tensor(%x, %s) {alpha=1}\n"
      "  %c0 : f32[1,4,5,5] = aten::conv2d(%x, %w3) {bias=None, stride=[1,1], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  %t1 : f32[1,4,5,5] = aten::add.Tensor(%t0, %c0) {alpha=1}\n"
      "  %c1 : f32[1,4,5,5] = aten::conv2d(%x, %v3) {bias=None, stride=[1,1], "
      "padding=[1,1], dilation=[1,1], groups=1}\n"
      "  %y : f32[1,4,5,5] = aten::add.Tensor(%t1, %c1) {alpha=1}\n"
      "  return (%y)\n",
      2);
  size_t convs = 0;
  for (size_t at = out.find("aten::conv2d"); at != std::string::npos;
       at = out.find("aten::conv2d", at + 1)) {
    ++convs;
  }
  EXPECT_EQ(convs, 1u) << out;
  EXPECT_NE(out.find("aten::add.Tensor(%x, "), std::string::npos) << out;
  EXPECT_NE(out.find("padding=[1,1]"), std::string::npos) << out;
}

// Each of these stays: another input, another stride, a dilation, a kernel whose centre the
// paddings put elsewhere, a branch read elsewhere too, a weight that is not frozen.
TEST(MergeConvBranchesTest, BranchesOnOtherGridsStay) {
  const std::string head =
      "graph(%x : f32[1,4,6,6], %z : f32[1,4,6,6], %wi : f32[4,4,3,3]):\n"
      "  %w3 : f32[4,4,3,3] = prim::Constant() {index=0}\n"
      "  %w1 : f32[4,4,1,1] = prim::Constant() {index=1}\n";
  const std::string a =
      "  %a : f32[1,4,6,6] = aten::conv2d(%x, %w3) {bias=None, stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=1}\n";
  const char* others[] = {
      "  %b : f32[1,4,6,6] = aten::conv2d(%z, %w1) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n",
      "  %b : f32[1,4,6,6] = aten::conv2d(%x, %w3) {bias=None, stride=[1,1], padding=[2,2], "
      "dilation=[2,2], groups=1}\n",
      "  %b : f32[1,4,6,6] = aten::conv2d(%x, %w1) {bias=None, stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=1}\n",
      "  %b : f32[1,4,6,6] = aten::conv2d(%x, %wi) {bias=None, stride=[1,1], padding=[1,1], "
      "dilation=[1,1], groups=1}\n",
  };
  for (const char* b : others) {
    const std::string text = head + a + b +
                             "  %y : f32[1,4,6,6] = aten::add.Tensor(%a, %b) {alpha=1}\n"
                             "  return (%y)\n";
    EXPECT_EQ(after_pass(text), text) << b;
  }
  const std::string read_elsewhere =
      head + a +
      "  %b : f32[1,4,6,6] = aten::conv2d(%x, %w1) {bias=None, stride=[1,1], padding=[0,0], "
      "dilation=[1,1], groups=1}\n"
      "  %y : f32[1,4,6,6] = aten::add.Tensor(%a, %b) {alpha=1}\n"
      "  return (%y, %b)\n";
  EXPECT_EQ(after_pass(read_elsewhere), read_elsewhere);
}

}  // namespace
}  // namespace kiln
