// onednn_conv: prepack_conv's oneDNN convolutions that become kiln::onednn_conv2d, with the weight
// packing left for fold_constants and ATen's packing chain removed; and prepack_conv's
// residual_anywhere, which that makes possible.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/onednn_conv.h"
#include "passes/plan_memory.h"
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

// A 1x1 convolution of 16 channels at `side` x `side`, then `rest` (reading %y, returning %r).
std::string conv_then(const std::string& rest, int64_t side = 8) {
  return "graph(%x : " + cl(16, side) +
         "):\n"
         "  %w : f32[16,16,1,1] = prim::Constant() {index=0}\n"
         "  %y : " +
         cl(16, side) +
         " = aten::conv2d(%x, %w) {bias=None, stride=[1,1], "
         "padding=[0,0], dilation=[1,1], groups=1}\n" +
         rest + "  return (%r)\n";
}

std::string activation_of(const std::string& printed) {
  const auto at = printed.find("kiln::onednn_conv2d(");
  const auto begin = printed.find("activation=\"", at);
  if (at == std::string::npos || begin == std::string::npos) return "";
  const auto end = printed.find('"', begin + 12);
  return printed.substr(begin + 12, end - begin - 12);
}

TEST(OneDnnConvTest, ActivationsAsTorchCompileDecomposesThemRunInside) {
  const std::string t = cl(16);
  const std::string silu =
      "  %s : " + t + " = aten::sigmoid(%y)\n  %r : " + t + " = aten::mul.Tensor(%y, %s)\n";
  const std::string relu6_plus_3 = "  %a : " + t +
                                   " = aten::add.Scalar(%y) {other=3, alpha=1}\n"
                                   "  %l : " +
                                   t +
                                   " = aten::clamp(%a) {min=0, max=None}\n"
                                   "  %h : " +
                                   t + " = aten::clamp(%l) {min=None, max=6}\n";
  const std::string hardswish = relu6_plus_3 + "  %m : " + t +
                                " = aten::mul.Tensor(%y, %h)\n"
                                "  %r : " +
                                t + " = aten::div.Scalar(%m) {other=6}\n";
  const std::string hardsigmoid =
      relu6_plus_3 + "  %r : " + t + " = aten::div.Scalar(%h) {other=6}\n";
  for (const auto& [rest, expected] : {std::pair{silu, "silu"},
                                       {hardswish, "hardswish"},
                                       {hardsigmoid, "hardsigmoid"},
                                       {"  %r : " + t + " = aten::sigmoid(%y)\n", "sigmoid"},
                                       {"  %r : " + t + " = aten::hardswish(%y)\n", "hardswish"}}) {
    const std::string printed = rewritten(conv_then(rest), 1);
    EXPECT_EQ(activation_of(printed), expected) << printed;
    EXPECT_NE(printed.find("%r : " + t + " = kiln::onednn_conv2d("), std::string::npos) << printed;
    EXPECT_EQ(printed.find("aten::"), std::string::npos) << printed;
    EXPECT_NE(printed.find("activation=\"" + std::string(expected) + "\", scalars=[]}\n  %r"),
              std::string::npos)
        << "the packed weight is packed for the same post-op: " << printed;
  }
}

TEST(OneDnnConvTest, ASqueezeExcitationGateOfOnePixelTakesItsContiguousSigmoid) {
  // [1, 16, 1, 1]: the sigmoid's output is typed contiguous, the convolution's channels-last;
  // for one pixel both are the same memory.
  const std::string printed =
      rewritten(conv_then("  %r : f32[1,16,1,1] = aten::sigmoid(%y)\n", 1), 1);
  EXPECT_EQ(activation_of(printed), "sigmoid") << printed;
}

TEST(OneDnnConvTest, AnActivationWhosePiecesAreReadElsewhereStaysOutside) {
  const std::string t = cl(16);
  for (const std::string& rest :
       {// the sigmoid is read again
        "  %s : " + t + " = aten::sigmoid(%y)\n  %m : " + t +
            " = aten::mul.Tensor(%y, %s)\n  %r : " + t +
            " = aten::add.Tensor(%m, %s) "
            "{alpha=1}\n",
        // y is read by a third node
        "  %s : " + t + " = aten::sigmoid(%y)\n  %m : " + t +
            " = aten::mul.Tensor(%y, %s)\n  %r : " + t +
            " = aten::add.Tensor(%m, %y) "
            "{alpha=1}\n",
        // not hardswish: + 2
        "  %a : " + t + " = aten::add.Scalar(%y) {other=2, alpha=1}\n  %l : " + t +
            " = aten::clamp(%a) {min=0, max=None}\n  %h : " + t +
            " = aten::clamp(%l) {min=None, max=6}\n  %r : " + t +
            " = aten::div.Scalar(%h) {other=6}\n"}) {
    const std::string printed = rewritten(conv_then(rest), 1);
    EXPECT_EQ(activation_of(printed), "none") << printed;
  }
}

TEST(OneDnnConvTest, TheImagesChannelsLastCopyRunsInsideTheConvolution) {
  // assign_layout's copy of a dense NCHW image, read by the convolution alone: the op reads the
  // image and converts it with oneDNN's reorder.
  const std::string copy = "  %x_nhwc : " + cl(16) +
                           " = aten::_to_copy(%x) {dtype=None, layout=None, device=None, "
                           "pin_memory=None, non_blocking=false, memory_format=2}\n";
  const std::string conv = "  %r : " + cl(16) +
                           " = aten::conv2d(%x_nhwc, %w) {bias=None, "
                           "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}\n";
  const std::string head =
      "graph(%x : f32[1,16,8,8]):\n"
      "  %w : f32[16,16,1,1] = prim::Constant() {index=0}\n";
  std::string printed = rewritten(head + copy + conv + "  return (%r)\n", 1);
  EXPECT_NE(printed.find("kiln::onednn_conv2d(%x, %w, %w_onednn)"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("aten::_to_copy"), std::string::npos) << printed;
  // Read by another node too: the copy stays.
  printed = rewritten(head + copy + conv + "  %s : " + cl(16) +
                          " = aten::add.Tensor(%r, %x_nhwc) {alpha=1}\n  return (%s)\n",
                      1, /*residual_anywhere=*/false);
  EXPECT_NE(printed.find("kiln::onednn_conv2d(%x_nhwc,"), std::string::npos) << printed;
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

// Whether a convolution of this weight ([k, c, kh, kw], `groups`, stride 2 over [1, c * groups,
// 16, 16]) multiplies in bf16 under precision=bf16.
bool multiplies_in_bf16(int64_t k, int64_t c, int64_t kernel, int64_t groups) {
  const std::string weight = "f32[" + std::to_string(k) + "," + std::to_string(c) + "," +
                             std::to_string(kernel) + "," + std::to_string(kernel) + "]";
  auto g =
      ir::parse_graph("graph(%x : " + cl(c * groups, 16) + "):\n  %w : " + weight +
                      " = prim::Constant() {index=0}\n  %r : " + cl(k, 8) +
                      " = aten::conv2d(%x, %w) {bias=None, stride=[2,2], padding=[" +
                      std::to_string(kernel / 2) + "," + std::to_string(kernel / 2) +
                      "], dilation=[1,1], groups=" + std::to_string(groups) + "}\n  return (%r)\n");
  EXPECT_EQ(prepack_conv(*g), 1);
  EXPECT_EQ(onednn_conv(*g, /*bf16=*/true), 1) << ir::print_graph(*g);
  const std::string printed = ir::print_graph(*g);
  return printed.find("precision=\"bf16\"") != std::string::npos;
}

// A 3-D convolution over an NDHWC [1, c, 4, 8, 8] clip, as assign_layout leaves it (here as
// aten::mkldnn_convolution, where ATen's own kernel would have been NCDHW), with a residual add
// and a relu: kiln::onednn_conv3d, its weight packed by kiln::onednn_conv3d_weight, the add and
// relu inside; ATen's conv3d reorder chain gone. Under bf16, the same rule as in 2-D by the
// weights each input value meets over three dims.
std::string ndhwc(int64_t c) {
  const std::string s = std::to_string(c);
  return "f32[1," + s + ",4,8,8]{" + std::to_string(c * 256) + ",1," + std::to_string(c * 64) +
         "," + std::to_string(c * 8) + "," + s + "}";
}

std::string conv3d_graph(int64_t c, const std::string& kernel, int64_t groups) {
  const std::string k = std::to_string(c / groups);
  return "graph(%x : " + ndhwc(c) + ", %i : " + ndhwc(32) +
         "):\n"
         "  %w : f32[32," +
         k + "," + kernel +
         "] = prim::Constant() {index=0}\n"
         "  %y : " +
         ndhwc(32) + " = aten::mkldnn_convolution(%x, %w) {padding=" +
         (kernel == "1,1,1" ? "[0,0,0]" : "[1,1,1]") +
         ", stride=[1,1,1], "
         "dilation=[1,1,1], groups=" +
         std::to_string(groups) + ", bias=None}\n  %s : " + ndhwc(32) +
         " = aten::add.Tensor(%y, %i) {alpha=1}\n  %r : " + ndhwc(32) +
         " = aten::relu(%s)\n  return (%r)\n";
}

TEST(OneDnnConvTest, AThreeDConvolutionBecomesOneOwnConvolution3d) {
  const std::string printed = rewritten(conv3d_graph(32, "3,3,3", 1), 1);
  EXPECT_NE(printed.find("%w_onednn : f32[27664] = kiln::onednn_conv3d_weight(%w) "
                         "{input_size=[1,32,4,8,8], stride=[1,1,1], padding=[1,1,1], "
                         "dilation=[1,1,1], groups=1, bias=false, residual=true, "
                         "activation=\"relu\", scalars=[]}"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("%r : " + ndhwc(32) +
                         " = kiln::onednn_conv3d(%x, %w, %w_onednn, %i) {bias=None, "
                         "stride=[1,1,1], padding=[1,1,1], dilation=[1,1,1], groups=1, "
                         "activation=\"relu\", scalars=[]}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("aten::"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("mkldnn"), std::string::npos) << printed;
  const auto bf16 = [](int64_t c, const std::string& kernel, int64_t groups) {
    auto g = ir::parse_graph(conv3d_graph(c, kernel, groups));
    prepack_conv(*g, true);
    EXPECT_EQ(onednn_conv(*g, /*bf16=*/true), 1) << ir::print_graph(*g);
    return ir::print_graph(*g).find("precision=\"bf16\"") != std::string::npos;
  };
  EXPECT_TRUE(bf16(32, "3,3,3", 1));    // 32 channels a group
  EXPECT_TRUE(bf16(8, "3,3,3", 1));     // 32 * 27 weights meet each input value
  EXPECT_FALSE(bf16(8, "1,1,1", 1));    // 32 * 1
  EXPECT_FALSE(bf16(32, "3,3,3", 32));  // depthwise: 27
}

TEST(OneDnnConvTest, UnderBf16OnlyConvolutionsBoundByTheirMultipliesRoundTheirInputs) {
  EXPECT_TRUE(multiplies_in_bf16(64, 64, 3, 1));   // 64 channels
  EXPECT_TRUE(multiplies_in_bf16(64, 3, 7, 1));    // ResNet's stem: 64 * 49 / 4 uses a pixel
  EXPECT_FALSE(multiplies_in_bf16(32, 3, 3, 1));   // MobileNet's stem: 32 * 9 / 4
  EXPECT_TRUE(multiplies_in_bf16(48, 3, 4, 1));    // 48 * 16 / 4, as ConvNeXt's 96 * 16 / 16
  EXPECT_FALSE(multiplies_in_bf16(32, 1, 3, 32));  // depthwise: 9
  EXPECT_FALSE(multiplies_in_bf16(64, 8, 3, 8));   // 8-wide groups: 8 * 9
}

// conv(%x) -> %a, conv(%a) -> %b, then conv(%b) adding %a -> %y (its residual), then `rest`.
std::string residual_chain(const std::string& residual_type, const std::string& rest) {
  const std::string attrs =
      "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
      "activation=\"relu\", scalars=[]}\n";
  return "graph(%x : " + cl(16) +
         "):\n"
         "  %w : f32[16,16,1,1] = prim::Constant() {index=0}\n"
         "  %p : f32[400] = prim::Constant() {index=1}\n"
         "  %a : " +
         residual_type + " = kiln::onednn_conv2d(%x, %w, %p) {bias=None, other=None, " + attrs +
         "  %b : " + cl(16) + " = kiln::onednn_conv2d(%a, %w, %p) {bias=None, other=None, " +
         attrs + "  %y : " + cl(16) + " = kiln::onednn_conv2d(%b, %w, %p, %a) {bias=None, " +
         attrs + rest;
}

/// plan_memory's in-place writes, as "written value: input index -> output index".
std::vector<std::string> written_in_place(const std::string& text) {
  auto g = ir::parse_graph(text);
  const MemoryPlan plan = plan_memory(
      *g, [](const ir::Node& node) { return node.op() == "kiln::onednn_conv2d"; },
      conv_in_place_candidates);
  std::vector<std::string> writes;
  for (const InPlaceWrite& write : plan.in_place) {
    writes.push_back(write.node->output(write.output)->name() + ": " + std::to_string(write.input) +
                     " -> " + std::to_string(write.output));
  }
  return writes;
}

TEST(OneDnnConvTest, AConvolutionIsPlannedOverTheResidualThatDiesThere) {
  const std::string last = "  %r : " + cl(16) +
                           " = kiln::onednn_conv2d(%y, %w, %p) {bias=None, other=None, "
                           "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
                           "activation=\"none\", scalars=[]}\n  return (%r)\n";
  EXPECT_EQ(written_in_place(residual_chain(cl(16), last)), std::vector<std::string>{"y: 3 -> 0"});

  // Not where the residual is read after it, nor where its type is not the output's.
  const std::string read_later = "  %r : " + cl(16) +
                                 " = kiln::onednn_conv2d(%y, %w, %p, %a) {bias=None, "
                                 "stride=[1,1], padding=[0,0], dilation=[1,1], groups=1, "
                                 "activation=\"none\", scalars=[]}\n  return (%r)\n";
  // (%r, a graph output, is not planned at all.)
  EXPECT_TRUE(written_in_place(residual_chain(cl(16), read_later)).empty());
  std::string bf16 = cl(16);
  bf16.replace(0, 3, "bf16");
  EXPECT_TRUE(written_in_place(residual_chain(bf16, last)).empty());
  std::string nchw = "f32[1,16,8,8]";
  EXPECT_TRUE(written_in_place(residual_chain(nchw, last)).empty());
}

}  // namespace
}  // namespace kiln
