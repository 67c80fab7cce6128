// bf16_activations: a bf16 convolution or linear writes bf16 where every reader is a oneDNN
// convolution or linear that takes it as a bf16 input (one that multiplies in bf16), a
// bf16 convolution that takes it as its residual, or a max pool, view or attention whose result is
// read so (an attention where its q, k and v all are); otherwise, and for a graph output, its
// output stays float32. A bf16 linear reads a bf16 copy of an input a
// kernel computes, which the fusers put into that kernel.
#include <string>

#include <gtest/gtest.h>

#include "passes/bf16_activations.h"
#include "passes/fuse_reductions.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

constexpr const char* kCl = "[1,32,8,8]{2048,1,256,32}";  // channels-last sizes and strides

/// `%out = kiln::onednn_conv2d(%in, %w, %p[, %other])`, multiplying in bf16 or float32.
std::string conv(const std::string& out, const std::string& in, bool bf16,
                 const std::string& other = "") {
  return "  %" + out + " : f32" + kCl + " = kiln::onednn_conv2d(%" + in + ", %w, %p" +
         (other.empty() ? "" : ", %" + other) + ") {bias=None, " +
         (other.empty() ? "other=None, " : "") +
         "stride=[1,1], padding=[1,1], dilation=[1,1], groups=1, activation=\"relu\", "
         "scalars=[]" +
         (bf16 ? ", precision=\"bf16\"" : "") + "}\n";
}

std::string graph(const std::string& body, const std::string& result) {
  return std::string("graph(%x : f32") + kCl +
         "):\n"
         "  %w : f32[32,32,3,3] = prim::Constant() {index=0}\n"
         "  %p : f32[9232] = prim::Constant() {index=1}\n" +
         body + "  return (%" + result + ")\n";
}

/// The printed type of `value` after the pass.
std::string type_of(const std::string& printed, const std::string& value) {
  const auto at = printed.find("  %" + value + " : ");
  if (at == std::string::npos) return "missing";
  const auto start = at + value.size() + 6;
  return printed.substr(start, printed.find('[', start) - start);
}

TEST(Bf16ActivationsTest, ConvolutionsHandEachOtherBf16ThroughInputsAndResiduals) {
  // A ResNet block: a feeds b and is c's residual; b feeds c; c is the graph's output.
  auto g = ir::parse_graph(
      graph(conv("a", "x", true) + conv("b", "a", true) + conv("c", "b", true, "a"), "c"));
  EXPECT_EQ(bf16_activations(*g), 2);
  const std::string printed = ir::print_graph(*g);
  EXPECT_EQ(type_of(printed, "a"), "bf16") << printed;
  EXPECT_EQ(type_of(printed, "b"), "bf16") << printed;
  EXPECT_EQ(type_of(printed, "c"), "f32") << printed;  // what the caller gets stays float32
  EXPECT_NE(printed.find("%b : bf16[1,32,8,8]{2048,1,256,32} = kiln::onednn_conv2d(%a, %w, %p)"),
            std::string::npos)
      << printed;  // the layout is kept
  EXPECT_NE(printed.find("precision=\"bf16\", out_precision=\"bf16\"}"), std::string::npos)
      << printed;
}

TEST(Bf16ActivationsTest, AReaderThatIsNotABf16ConvolutionKeepsItsInputFloat32) {
  // b multiplies in float32 (a depthwise one would), r is not a convolution, and d's output is
  // also a graph output: a, c and d stay float32; e's input is read by bf16 convolutions alone.
  // r's kernel writes a bf16 copy for d, its only reader (the rounding d's reorder would make).
  auto g =
      ir::parse_graph(graph(conv("a", "x", true) + conv("b", "a", false) + conv("c", "b", true) +
                                "  %r : f32" + kCl + " = aten::relu(%c)\n" + conv("d", "r", true) +
                                conv("e", "d", true) + conv("f", "e", true),
                            "d, %f"));
  EXPECT_EQ(bf16_activations(*g), 2);
  const std::string printed = ir::print_graph(*g);
  for (const char* value : {"a", "b", "c", "r", "d", "f"})
    EXPECT_EQ(type_of(printed, value), "f32") << value << "\n" << printed;
  EXPECT_EQ(type_of(printed, "e"), "bf16") << printed;
  EXPECT_EQ(type_of(printed, "r_bf16"), "bf16") << printed;
  EXPECT_NE(printed.find("kiln::onednn_conv2d(%r_bf16, %w, %p)"), std::string::npos) << printed;
}

TEST(Bf16ActivationsTest, AFloat32ConvolutionsResidualStaysFloat32) {
  // RepVGG's branches: a feeds b alone, and c adds it as its residual; c multiplies in float32
  // (a depthwise one would), so a stays float32 although b would read it in bf16.
  auto g = ir::parse_graph(
      graph(conv("a", "x", true) + conv("b", "a", true) + conv("c", "b", false, "a"), "c"));
  bf16_activations(*g);
  const std::string printed = ir::print_graph(*g);
  EXPECT_EQ(type_of(printed, "a"), "f32") << printed;
  EXPECT_EQ(type_of(printed, "c"), "f32") << printed;
}

TEST(Bf16ActivationsTest, AMaxPoolBetweenThemComputesInBf16Too) {
  const std::string pool = std::string("f32") + kCl +
                           " = aten::max_pool2d(%a) {kernel_size=[3,3], stride=[1,1], "
                           "padding=[1,1], dilation=[1,1], ceil_mode=false}\n";
  // ResNet's stem, pool and first block: the pool's result is c's input and d's residual.
  auto g = ir::parse_graph(graph(
      conv("a", "x", true) + "  %m : " + pool + conv("c", "m", true) + conv("d", "c", true, "m"),
      "d"));
  EXPECT_EQ(bf16_activations(*g), 2);
  std::string printed = ir::print_graph(*g);
  for (const char* value : {"a", "m", "c"})
    EXPECT_EQ(type_of(printed, value), "bf16") << value << "\n" << printed;
  // A pool whose result is also returned keeps it, and its input, float32.
  g = ir::parse_graph(
      graph(conv("a", "x", true) + "  %m : " + pool + conv("c", "m", true), "m, %c"));
  EXPECT_EQ(bf16_activations(*g), 0);
  printed = ir::print_graph(*g);
  EXPECT_EQ(printed.find("bf16["), std::string::npos) << printed;
}

/// A transformer's feed-forward block: a layer norm, two linears (the first with its GELU as a
/// post-op), the residual add; the linears multiply in bf16 where `bf16`.
std::string feed_forward(bool bf16) {
  const std::string precision = bf16 ? ", precision=\"bf16\"" : "";
  return "graph(%x : f32[4,64], %g : f32[64], %c : f32[64], %w1 : f32[256,64], %p1 : f32[9000], "
         "%b1 : f32[256], %w2 : f32[64,256], %p2 : f32[9000], %b2 : f32[64]):\n"
         "  %h : f32[4,64] = aten::layer_norm(%x, %g, %c) {normalized_shape=[64], eps=1e-05, "
         "cudnn_enable=true}\n"
         "  %a : f32[4,256] = kiln::onednn_linear(%h, %w1, %p1, %b1) {activation=\"gelu\"" +
         precision +
         "}\n"
         "  %b : f32[4,64] = kiln::onednn_linear(%a, %w2, %p2, %b2) {" +
         (bf16 ? precision.substr(2) : std::string("activation=\"none\"")) +
         "}\n"
         "  %r : f32[4,64] = aten::add.Tensor(%b, %h) {alpha=1}\n"
         "  return (%r)\n";
}

TEST(Bf16ActivationsTest, LinearsReadBf16FromLinearsAndFromKernels) {
  auto g = ir::parse_graph(feed_forward(true));
  // The first linear's output, and a bf16 copy of the layer norm's for it.
  EXPECT_EQ(bf16_activations(*g), 2);
  std::string printed = ir::print_graph(*g);
  EXPECT_EQ(type_of(printed, "a"), "bf16") << printed;
  EXPECT_NE(printed.find("activation=\"gelu\", precision=\"bf16\", out_precision=\"bf16\"}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(type_of(printed, "b"), "f32") << printed;  // read by the add
  EXPECT_EQ(type_of(printed, "h"), "f32") << printed;  // the add still reads it
  EXPECT_EQ(type_of(printed, "h_bf16"), "bf16") << printed;
  EXPECT_NE(printed.find("%h_bf16 : bf16[4,64] = aten::_to_copy(%h) {dtype=15"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("kiln::onednn_linear(%h_bf16, %w1, %p1, %b1)"), std::string::npos)
      << printed;
  // The layer norm's kernel writes both: the copy is its epilogue, not a kernel of its own.
  EXPECT_EQ(fuse_reductions(*g), 1);
  printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("%h : f32[4,64], %h_bf16 : bf16[4,64] = kiln::fused(%x, %g, %c)"),
            std::string::npos)
      << printed;
  // Float32 linears are left as they are.
  g = ir::parse_graph(feed_forward(false));
  EXPECT_EQ(bf16_activations(*g), 0);
  EXPECT_EQ(ir::print_graph(*g).find("bf16"), std::string::npos);
}

TEST(Bf16ActivationsTest, ATransposedInputIsCopiedToDenseBf16Once) {
  // MLP-Mixer's token mixing: the linear reads a transpose of the layer norm's output. One dense
  // bf16 copy replaces the linear's dense float32 copy and its rounding of that.
  auto g = ir::parse_graph(
      "graph(%x : f32[1,8,4], %w : f32[16,8], %p : f32[9000]):\n"
      "  %h : f32[1,8,4] = aten::relu(%x)\n"
      "  %t : f32[1,4,8]{32,1,4} = aten::transpose.int(%h) {dim0=1, dim1=2}\n"
      "  %y : f32[1,4,16] = kiln::onednn_linear(%t, %w, %p) {bias=None, precision=\"bf16\"}\n"
      "  return (%y)\n");
  EXPECT_EQ(bf16_activations(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("%t_bf16 : bf16[1,4,8] = aten::_to_copy(%t) {dtype=15"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("memory_format=0}"), std::string::npos) << printed;
  EXPECT_NE(printed.find("kiln::onednn_linear(%t_bf16, %w, %p)"), std::string::npos) << printed;
}

TEST(Bf16ActivationsTest, ALinearReadingAGraphInputRoundsItItself) {
  // Nothing in the graph computes %x: the linear's own reorder rounds it, with no copy.
  auto g = ir::parse_graph(
      "graph(%x : f32[4,64], %w : f32[32,64], %p : f32[9000]):\n"
      "  %y : f32[4,32] = kiln::onednn_linear(%x, %w, %p) {bias=None, precision=\"bf16\"}\n"
      "  return (%y)\n");
  EXPECT_EQ(bf16_activations(*g), 0);
  EXPECT_EQ(ir::print_graph(*g).find("bf16["), std::string::npos);
}

/// A ViT's attention: one linear computes q, k and v, views take them apart, ATen's flash
/// attention reads them, and the projection reads its output through a permute and a view.
/// `attention` is the attention node's line after its `= `; `result` the graph's outputs.
std::string attention_block(const std::string& attention, const std::string& result = "y") {
  return "graph(%x : f32[1,8,48], %w : f32[48,16], %p : f32[9000], %wo : f32[16,16], "
         "%po : f32[9000], %m : f32[1,1,8,8]):\n"
         "  %h : f32[1,8,48] = aten::relu(%x)\n"
         "  %qkv : f32[1,8,48] = kiln::onednn_linear(%h, %w, %p) {bias=None, precision=\"bf16\"}\n"
         "  %v5 : f32[1,8,3,2,8] = aten::view(%qkv) {size=[1,8,3,2,8]}\n"
         "  %t : f32[3,1,2,8,8]{16,384,8,48,1} = aten::permute(%v5) {dims=[2,0,3,1,4]}\n"
         "  %q : f32[1,2,8,8]{384,8,48,1} = aten::select.int(%t) {dim=0, index=0}\n"
         "  %k : f32[1,2,8,8]{384,8,48,1} = aten::select.int(%t) {dim=0, index=1}\n"
         "  %v : f32[1,2,8,8]{384,8,48,1} = aten::select.int(%t) {dim=0, index=2}\n"
         "  %a : f32[1,2,8,8]{128,8,16,1}, %lse : f32[1,2,8]{16,1,2} = " +
         attention +
         "\n"
         "  %ap : f32[1,8,2,8] = aten::permute(%a) {dims=[0,2,1,3]}\n"
         "  %av : f32[1,8,16] = aten::view(%ap) {size=[1,8,16]}\n"
         "  %y : f32[1,8,16] = kiln::onednn_linear(%av, %wo, %po) {bias=None, precision=\"bf16\"}\n"
         "  return (%" +
         result + ")\n";
}

constexpr const char* kFlash = "aten::_scaled_dot_product_flash_attention_for_cpu";

TEST(Bf16ActivationsTest, AttentionBetweenBf16LinearsReadsAndWritesBf16) {
  const std::string plain = std::string(kFlash) +
                            "(%q, %k, %v) {dropout_p=0.0, is_causal=false, attn_mask=None, "
                            "scale=None}";
  auto g = ir::parse_graph(attention_block(plain));
  // The q/k/v linear's output, the attention's, and the relu's bf16 copy for the linear.
  EXPECT_EQ(bf16_activations(*g), 3);
  std::string printed = ir::print_graph(*g);
  for (const char* value : {"qkv", "v5", "t", "q", "k", "v", "a", "ap", "av"})
    EXPECT_EQ(type_of(printed, value), "bf16") << value << "\n" << printed;
  EXPECT_NE(printed.find("%t : bf16[3,1,2,8,8]{16,384,8,48,1}"), std::string::npos)
      << printed;  // a view keeps its strides
  EXPECT_NE(printed.find(", %lse : f32[1,2,8]"), std::string::npos) << printed;  // as ATen has it
  EXPECT_EQ(type_of(printed, "y"), "f32") << printed;
  EXPECT_NE(printed.find("precision=\"bf16\", out_precision=\"bf16\"}"), std::string::npos)
      << printed;

  // An unread view of the linear's output (dead code an earlier rewrite left) changes nothing.
  std::string with_dead_view = attention_block(plain);
  with_dead_view.replace(with_dead_view.find("  %v5 : "), 0,
                         "  %dead : f32[1,8,48] = aten::view(%qkv) {size=[1,8,48]}\n");
  g = ir::parse_graph(with_dead_view);
  EXPECT_EQ(bf16_activations(*g), 3);
  printed = ir::print_graph(*g);
  EXPECT_EQ(type_of(printed, "a"), "bf16") << printed;
  EXPECT_EQ(printed.find("%dead"), std::string::npos) << printed;

  // A float32 additive mask is read as it is; an attention with its own masked, causal or scaled
  // softmax computes in bf16 the same way.
  g = ir::parse_graph(attention_block(
      std::string(kFlash) + "(%q, %k, %v, %m) {dropout_p=0.0, is_causal=false, scale=0.125}"));
  EXPECT_EQ(bf16_activations(*g), 3);
  printed = ir::print_graph(*g);
  EXPECT_EQ(type_of(printed, "a"), "bf16") << printed;
  EXPECT_NE(printed.find("(%q, %k, %v, %m)"), std::string::npos) << printed;
}

TEST(Bf16ActivationsTest, AttentionStaysFloat32UnlessAllItsOperandsAndReadersAreBf16) {
  const std::string plain = std::string(kFlash) +
                            "(%q, %k, %v) {dropout_p=0.0, is_causal=false, attn_mask=None, "
                            "scale=None}";
  // The attention's output is also the graph's: it stays float32, and so does everything that
  // feeds it (the linear would round only for an attention that does not).
  auto g = ir::parse_graph(attention_block(plain, "y, %a"));
  EXPECT_EQ(bf16_activations(*g), 1);  // the relu's copy for the first linear, nothing else
  std::string printed = ir::print_graph(*g);
  for (const char* value : {"qkv", "q", "a", "av"})
    EXPECT_EQ(type_of(printed, value), "f32") << value << "\n" << printed;

  // v is a kernel's output, not a bf16 linear's: no operand is made bf16.
  std::string text = attention_block(plain);
  text.replace(text.find("(%q, %k, %v)"), 12, "(%q, %k, %r)");
  text.replace(text.find("  %a : "), 0, "  %r : f32[1,2,8,8]{384,8,48,1} = aten::relu(%v)\n");
  g = ir::parse_graph(text);
  EXPECT_EQ(bf16_activations(*g), 1);
  printed = ir::print_graph(*g);
  for (const char* value : {"qkv", "q", "k", "a"})
    EXPECT_EQ(type_of(printed, value), "f32") << value << "\n" << printed;

  // Dropout draws random numbers: left as it is.
  g = ir::parse_graph(
      attention_block(std::string(kFlash) +
                      "(%q, %k, %v) {dropout_p=0.1, is_causal=false, attn_mask=None, scale=None}"));
  EXPECT_EQ(bf16_activations(*g), 1);
  EXPECT_EQ(type_of(ir::print_graph(*g), "a"), "f32");

  // A mask that the q/k/v linear's output also feeds keeps that output float32.
  g = ir::parse_graph(attention_block(
      std::string(kFlash) + "(%q, %k, %v, %q) {dropout_p=0.0, is_causal=false, scale=None}"));
  EXPECT_EQ(bf16_activations(*g), 1);
  EXPECT_EQ(type_of(ir::print_graph(*g), "qkv"), "f32");
}

TEST(Bf16ActivationsTest, FloatConvolutionsAreLeftAsTheyAre) {
  auto g = ir::parse_graph(graph(conv("a", "x", false) + conv("b", "a", false), "b"));
  EXPECT_EQ(bf16_activations(*g), 0);
  EXPECT_EQ(ir::print_graph(*g).find("bf16"), std::string::npos);
}

}  // namespace
}  // namespace kiln
