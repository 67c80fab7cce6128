#include <string>

#include <gtest/gtest.h>

#include "passes/assign_layout.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

bool is_channels_last(const ir::TensorType& t) {
  return (t.rank() == 4 || t.rank() == 5) && t.strides == channels_last_strides(t.sizes);
}

// ATen's rule for the ops these tests use: a permutation permutes its input's strides, an output
// of its first input's sizes takes its strides, another output of its rank follows its
// channels-last layout; a view of a tensor that is not contiguous fails.
std::optional<std::vector<ir::TensorType>> fake_infer(const ir::Node& node,
                                                      const std::vector<ir::TensorType>& inputs) {
  const ir::TensorType& in = inputs.at(0);
  if (node.op() == "aten::view" && !in.is_contiguous()) return std::nullopt;
  std::vector<ir::TensorType> types;
  for (const ir::Value* out : node.outputs()) {
    ir::TensorType t = out->type();
    if (node.op() == "aten::permute") {
      const auto& dims = std::get<std::vector<int64_t>>(*node.find_attr("dims"));
      for (size_t i = 0; i < dims.size(); ++i)
        t.strides[i] = in.strides[dims[i]];
    } else if (t.sizes == in.sizes) {
      t.strides = in.strides;
    } else {
      t.strides = is_channels_last(in) && t.rank() == in.rank() ? channels_last_strides(t.sizes)
                                                                : ir::contiguous_strides(t.sizes);
    }
    types.push_back(t);
  }
  return types;
}

constexpr const char* kConv = "{stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}";

// The graph's header with two frozen convolution weights, %w1 and %w2.
constexpr const char* kFrozenWeights =
    "graph(%x : f32[1,3,8,8]):\n"
    "  %w1 : f32[4,3,3,3] = prim::Constant() {index=0}\n"
    "  %w2 : f32[4,4,3,3] = prim::Constant() {index=1}\n";

std::string conv(const std::string& out, const std::string& in, const std::string& w) {
  return "  %" + out + " : f32[1,4,8,8] = aten::conv2d(%" + in + ", %" + w + ") " + kConv + "\n";
}

TEST(AssignLayoutTest, ConvolutionsRunChannelsLastWithConversionsAtTheBoundary) {
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") +
                           "  %r : f32[1,4,8,8] = aten::relu(%y)\n" + conv("z", "r", "w2") +
                           "  return (%z)\n");
  // The image in, the result out; the weights' copies are computed at compile time.
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);
  const std::string copy = " = aten::_to_copy(%";
  const std::string attrs =
      ") {dtype=None, layout=None, device=None, pin_memory=None, non_blocking=false, ";
  const std::string nhwc4 = "f32[1,4,8,8]{256,1,32,4}";
  EXPECT_EQ(ir::print_graph(*g), std::string(kFrozenWeights) +
                                     "  %x_nhwc : f32[1,3,8,8]{192,1,24,3}" + copy + "x" + attrs +
                                     "memory_format=2}\n"
                                     "  %w1_nhwc : f32[4,3,3,3]{27,1,9,3}" +
                                     copy + "w1" + attrs +
                                     "memory_format=2}\n"
                                     "  %y : " +
                                     nhwc4 + " = aten::conv2d(%x_nhwc, %w1_nhwc) " + kConv +
                                     "\n"
                                     "  %r : " +
                                     nhwc4 +
                                     " = aten::relu(%y)\n"
                                     "  %w2_nhwc : f32[4,4,3,3]{36,1,12,4}" +
                                     copy + "w2" + attrs +
                                     "memory_format=2}\n"
                                     "  %z : " +
                                     nhwc4 + " = aten::conv2d(%r, %w2_nhwc) " + kConv +
                                     "\n"
                                     "  %z_contiguous : f32[1,4,8,8]" +
                                     copy + "z" + attrs +
                                     "memory_format=0}\n"
                                     "  return (%z_contiguous)\n");
}

TEST(AssignLayoutTest, OneConvolutionRunsChannelsLastToo) {
  // oneDNN's prepacked convolution reads the image in its own layout and packs the weight once;
  // ATen's reorders the weight on every call: one convolution pays for the copy of its output.
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") + "  return (%y)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("= aten::conv2d(%x_nhwc, %w1_nhwc)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("return (%y_contiguous)"), std::string::npos) << ir;
}

TEST(AssignLayoutTest, AConvolutionOverAWeightThatIsAGraphInputStaysAsItWas) {
  const std::string text =
      "graph(%x : f32[1,3,8,8], %w1 : f32[4,3,3,3]):\n" + conv("y", "x", "w1") + "  return (%y)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(assign_layout(*g, fake_infer), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(AssignLayoutTest, AViewThatNeedsTheOldStridesGetsAContiguousCopy) {
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") + conv("z", "y", "w2") +
                           "  %v : f32[1,256] = aten::view(%z) {size=[1,256]}\n"
                           "  %e : f32[1,4,8,8] = aten::exp(%z)\n"
                           "  return (%v, %e)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 3);
  const std::string ir = ir::print_graph(*g);
  // The view reads the contiguous copy, made right before it; exp keeps channels-last and the
  // graph output is converted back.
  EXPECT_NE(ir.find("  %z_contiguous : f32[1,4,8,8] = aten::_to_copy(%z)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("aten::view(%z_contiguous)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("  %e : f32[1,4,8,8]{256,1,32,4} = aten::exp(%z)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("return (%v, %e_contiguous)"), std::string::npos) << ir;
}

TEST(AssignLayoutTest, AnOpOutsideTheOpTableReadsTheOldLayout) {
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") + conv("z", "y", "w2") +
                           "  %u : f32[1,4,8,8] = custom::op(%y)\n"
                           "  %s : f32[1,4,8,8] = aten::add.Tensor(%u, %z) {alpha=1}\n"
                           "  return (%s)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("  %u : f32[1,4,8,8] = custom::op(%y_contiguous)"), std::string::npos) << ir;
  // add follows its first input, now contiguous: its output needs no conversion back.
  EXPECT_NE(ir.find("  %s : f32[1,4,8,8] = aten::add.Tensor(%u, %z)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("return (%s)"), std::string::npos) << ir;
}

TEST(AssignLayoutTest, APermutedValueTakesTheNewLayoutAndIsRestoredWhereItsOldOneIsNeeded) {
  // ConvNeXt's permute to NHWC: over a channels-last convolution it is contiguous. Its readers
  // follow; an op outside the op table and the graph output get the old, permuted-NCHW strides
  // back from one copy: permuted to memory order, copied contiguous, permuted back.
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") +
                           "  %t : f32[1,8,8,4]{256,8,1,64} = aten::permute(%y) {dims=[0,2,3,1]}\n"
                           "  %e : f32[1,8,8,4]{256,8,1,64} = aten::exp(%t)\n"
                           "  %u : f32[1,8,8,4]{256,8,1,64} = custom::op(%e)\n"
                           "  return (%e, %u)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);  // the image in, %e restored once
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("  %t : f32[1,8,8,4] = aten::permute(%y) {dims=[0,2,3,1]}"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("  %e : f32[1,8,8,4] = aten::exp(%t)"), std::string::npos) << ir;
  EXPECT_NE(ir.find(" : f32[1,4,8,8]{256,1,32,4} = aten::permute(%e) {dims=[0,3,1,2]}"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("  %e_restored : f32[1,8,8,4]{256,8,1,64} = aten::permute("), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("  %u : f32[1,8,8,4]{256,8,1,64} = custom::op(%e_restored)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("return (%e_restored, %u)"), std::string::npos) << ir;
}

TEST(AssignLayoutTest, AValueWithGapsKeepsItsLayout) {
  // A slice's strides skip elements: no copy could restore them, so it keeps its layout and the
  // slice reads the convolution's output in the old one.
  auto g = ir::parse_graph(kFrozenWeights + conv("y", "x", "w1") +
                           "  %s : f32[1,4,8,4]{256,64,8,1} = aten::slice.Tensor(%y) {dim=3, "
                           "start=0, end=4, step=1}\n"
                           "  return (%s)\n");
  auto slice_infer = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<ir::TensorType> types{node.output()->type()};
    types[0].strides = inputs.at(0).strides;  // a slice keeps its input's strides
    return std::optional<std::vector<ir::TensorType>>(types);
  };
  assign_layout(*g, slice_infer);
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("  %s : f32[1,4,8,4]{256,64,8,1} = aten::slice.Tensor(%y_contiguous)"),
            std::string::npos)
      << ir;
}

TEST(AssignLayoutTest, NothingChangesWhenNoOpCanBeRetyped) {
  const std::string text =
      kFrozenWeights + conv("y", "x", "w1") + conv("z", "y", "w2") + "  return (%z)\n";
  auto g = ir::parse_graph(text);
  auto never = [](const ir::Node&, const std::vector<ir::TensorType>&) {
    return std::optional<std::vector<ir::TensorType>>();
  };
  EXPECT_EQ(assign_layout(*g, never), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(AssignLayoutTest, WeightsThatAreInputsKeepConvolutionsAsTheyWereButNotMaxPool) {
  // A training graph's weights: oneDNN would reorder them on every call.
  const std::string pool =
      "  %p : f32[1,64,4,4] = aten::max_pool2d(%y) {kernel_size=[2,2], stride=[2,2]}\n";
  auto g = ir::parse_graph(
      "graph(%x : f32[1,64,8,8], %w1 : f32[64,64,3,3], %w2 : f32[64,64,3,3]):\n"
      "  %y : f32[1,64,8,8] = aten::conv2d(%x, %w1) " +
      std::string(kConv) + "\n" + pool +
      "  %r : f32[1,64,4,4] = aten::relu(%p)\n"
      "  %z : f32[1,64,4,4] = aten::conv2d(%r, %w2) " +
      kConv +
      "\n"
      "  return (%z)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("aten::conv2d(%x, %w1)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("aten::max_pool2d(%y_nhwc)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("%r : f32[1,64,4,4]{1024,1,256,64} = aten::relu(%p)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("aten::conv2d(%r_contiguous, %w2)"), std::string::npos) << ir;
}

TEST(AssignLayoutTest, ChannelsLastStrides) {
  EXPECT_EQ(channels_last_strides({2, 3, 4, 5}), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(channels_last_strides({2, 3, 4, 5, 6}), (std::vector<int64_t>{360, 1, 90, 18, 3}));
}

// 3-D convolutions: the same over NDHWC (channels_last_3d, memory_format=3).
constexpr const char* kFrozenWeights3d =
    "graph(%x : f32[1,3,4,8,8]):\n"
    "  %w1 : f32[4,3,3,3,3] = prim::Constant() {index=0}\n"
    "  %w2 : f32[4,4,3,3,3] = prim::Constant() {index=1}\n";

std::string conv3d(const std::string& out, const std::string& in, const std::string& w) {
  return "  %" + out + " : f32[1,4,4,8,8] = aten::conv3d(%" + in + ", %" + w +
         ") {stride=[1,1,1], padding=[1,1,1], dilation=[1,1,1], groups=1}\n";
}

TEST(AssignLayoutTest, ThreeDConvolutionsRunNdhwc) {
  auto g = ir::parse_graph(kFrozenWeights3d + conv3d("y", "x", "w1") +
                           "  %r : f32[1,4,4,8,8] = aten::relu(%y)\n" + conv3d("z", "r", "w2") +
                           "  return (%z)\n");
  EXPECT_EQ(assign_layout(*g, fake_infer), 2);
  const std::string ir = ir::print_graph(*g);
  EXPECT_NE(ir.find("  %x_ndhwc : f32[1,3,4,8,8]{768,1,192,24,3} = aten::_to_copy(%x)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("memory_format=3}"), std::string::npos) << ir;
  EXPECT_NE(ir.find("aten::conv3d(%x_ndhwc, %w1_ndhwc)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("  %r : f32[1,4,4,8,8]{1024,1,256,32,4} = aten::relu(%y)"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("return (%z_contiguous)"), std::string::npos) << ir;
}

// ATen runs a 3-D convolution over few values on its native kernel, NCDHW whatever the input:
// the convolution becomes aten::mkldnn_convolution, channels-last in and out. Where ATen has
// none (its inference fails), the convolution stays, and what reads it reads its NCDHW output.
TEST(AssignLayoutTest, AThreeDConvolutionThatAtenRunsNcdhwRunsOnOneDnn) {
  const std::string text = kFrozenWeights3d + conv3d("z", "x", "w1") +
                           "  %e : f32[1,4,4,8,8] = aten::exp(%z)\n  return (%e)\n";
  for (bool has_mkldnn : {true, false}) {
    SCOPED_TRACE(has_mkldnn ? "with mkldnn_convolution" : "without");
    const auto native_ncdhw =
        [&](const ir::Node& node,
            const std::vector<ir::TensorType>& in) -> std::optional<std::vector<ir::TensorType>> {
      if (node.op() == "aten::conv3d") return std::vector<ir::TensorType>{node.output()->type()};
      if (node.op() == "aten::mkldnn_convolution" && !has_mkldnn) return std::nullopt;
      return fake_infer(node, in);
    };
    auto g = ir::parse_graph(text);
    assign_layout(*g, native_ncdhw);
    const std::string ir = ir::print_graph(*g);
    if (has_mkldnn) {
      EXPECT_NE(ir.find("  %z : f32[1,4,4,8,8]{1024,1,256,32,4} = aten::mkldnn_convolution("
                        "%x_ndhwc, %w1_ndhwc) {padding=[1,1,1], stride=[1,1,1], "
                        "dilation=[1,1,1], groups=1, bias=None}"),
                std::string::npos)
          << ir;
      EXPECT_EQ(ir.find("aten::conv3d"), std::string::npos) << ir;
      EXPECT_NE(ir.find("return (%e_contiguous)"), std::string::npos) << ir;
    } else {
      EXPECT_NE(ir.find("  %z : f32[1,4,4,8,8] = aten::conv3d(%x_ndhwc, %w1_ndhwc)"),
                std::string::npos)
          << ir;
      EXPECT_NE(ir.find("  %e : f32[1,4,4,8,8] = aten::exp(%z)"), std::string::npos) << ir;
      EXPECT_EQ(ir.find("mkldnn_convolution"), std::string::npos) << ir;
    }
  }
}

}  // namespace
}  // namespace kiln
