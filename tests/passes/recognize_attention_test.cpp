// recognize_attention: matmul -> scale -> additive mask -> softmax -> matmul, as TorchScript and
// dynamo write it, becomes one aten::scaled_dot_product_attention; anything else stays.
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/recognize_attention.h"

namespace kiln {
namespace {

constexpr const char* kHeader =
    "graph(%q : f32[1,2,8,4], %kt : f32[1,2,4,8], %v : f32[1,2,8,4], %m : f32[1,1,1,8]):\n";

/// TorchScript's form: `scale` and `mask` are the lines between the products (or empty), reading
/// `%s` and writing what the softmax reads, `%a`.
std::string traced(const std::string& tail = "  return (%o)\n") {
  return std::string(kHeader) +
         "  %s : f32[1,2,8,8] = aten::matmul(%q, %kt)\n"
         "  %c : f32[1,2,8,8] = aten::div.Scalar(%s) {other=2.0}\n"
         "  %a : f32[1,2,8,8] = aten::add.Tensor(%c, %m) {alpha=1}\n"
         "  %p : f32[1,2,8,8] = aten::softmax.int(%a) {dim=-1, dtype=None}\n"
         "  %o : f32[1,2,8,4] = aten::matmul(%p, %v)\n" +
         tail;
}

/// Dynamo's form of one 4-D product `out` = `a` `b`: views of no-op expands, a bmm, a view.
std::string dynamo_product(const std::string& out, const std::string& a, const std::string& as,
                           const std::string& b, const std::string& bs, const std::string& os) {
  return "  %" + out + "_ae : f32[1,2," + as + "] = aten::expand(%" + a + ") {size=[1,2," + as +
         "], implicit=false}\n  %" + out + "_a : f32[2," + as + "] = aten::view(%" + out +
         "_ae) {size=[2," + as + "]}\n  %" + out + "_be : f32[1,2," + bs + "] = aten::expand(%" +
         b + ") {size=[1,2," + bs + "], implicit=false}\n  %" + out + "_b : f32[2," + bs +
         "] = aten::view(%" + out + "_be) {size=[2," + bs + "]}\n  %" + out + "_f : f32[2," + os +
         "] = aten::bmm(%" + out + "_a, %" + out + "_b)\n  %" + out + " : f32[1,2," + os +
         "] = aten::view(%" + out + "_f) {size=[1,2," + os + "]}\n";
}

std::string dynamo() {
  return std::string(kHeader) + dynamo_product("s", "q", "8,4", "kt", "4,8", "8,8") +
         "  %c : f32[1,2,8,8] = aten::mul.Scalar(%s) {other=0.5}\n"
         "  %p : f32[1,2,8,8] = aten::_softmax(%c) {dim=-1, half_to_float=false}\n" +
         dynamo_product("o", "p", "8,8", "v", "8,4", "8,4") + "  return (%o)\n";
}

TEST(RecognizeAttentionTest, TracedAttentionBecomesOneFusedAttention) {
  auto g = ir::parse_graph(traced());
  EXPECT_EQ(recognize_attention(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            std::string(kHeader) +
                "  %kt_t : f32[1,2,8,4]{64,32,1,8} = aten::transpose.int(%kt) {dim0=2, dim1=3}\n"
                "  %o : f32[1,2,8,4] = aten::scaled_dot_product_attention(%q, %kt_t, %v, %m) "
                "{dropout_p=0.0, is_causal=false, scale=0.5, enable_gqa=false}\n"
                "  return (%o)\n");
}

TEST(RecognizeAttentionTest, DynamosBatchedProductsAreTakenApartToo) {
  auto g = ir::parse_graph(dynamo());
  EXPECT_EQ(recognize_attention(*g), 1);
  const std::string printed = ir::print_graph(*g);
  EXPECT_NE(printed.find("aten::scaled_dot_product_attention(%q, %kt_t, %v) {attn_mask=None, "
                         "dropout_p=0.0, is_causal=false, scale=0.5, enable_gqa=false}"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("bmm"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("softmax"), std::string::npos) << printed;
}

TEST(RecognizeAttentionTest, WhatIsNotExactlyAttentionStaysAsItIs) {
  std::string probabilities_returned = traced("  return (%o, %p)\n");
  std::string other_dim = traced();
  other_dim.replace(other_dim.find("dim=-1"), 6, "dim=2");
  std::string scaled_add = traced();
  scaled_add.replace(scaled_add.find("{alpha=1}"), 9, "{alpha=2}");
  std::string int_mask = traced();
  int_mask.replace(int_mask.find("%m : f32"), 8, "%m : i64");
  std::string broadcast_value = traced();  // v shared by the heads: [1,1,8,4]
  broadcast_value.replace(broadcast_value.find("%v : f32[1,2,8,4]"), 17, "%v : f32[1,1,8,4]");
  for (const std::string& text :
       {probabilities_returned, other_dim, scaled_add, int_mask, broadcast_value}) {
    auto g = ir::parse_graph(text);
    const std::string before = ir::print_graph(*g);
    EXPECT_EQ(recognize_attention(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), before);
  }
}

/// Scores masked by a fill: `fill` is the line that reads the scaled scores `%c` and writes `%a`
/// for the softmax, with a bool mask %b [1,1,8,8] and, for dynamo's where, a 0-d fill %f.
std::string filled(const std::string& fill) {
  return "graph(%q : f32[1,2,8,4], %kt : f32[1,2,4,8], %v : f32[1,2,8,4], %b : b8[1,1,8,8]):\n"
         "  %s : f32[1,2,8,8] = aten::matmul(%q, %kt)\n"
         "  %c : f32[1,2,8,8] = aten::div.Scalar(%s) {other=2.0}\n"
         "  %f : f32[] = aten::scalar_tensor() {s=-inf, dtype=6, layout=0, device=\"cpu\", "
         "pin_memory=None}\n" +
         fill +
         "  %p : f32[1,2,8,8] = aten::softmax.int(%a) {dim=-1, dtype=None}\n"
         "  %o : f32[1,2,8,4] = aten::matmul(%p, %v)\n"
         "  return (%o)\n";
}

TEST(RecognizeAttentionTest, ScoresFilledWhereMaskedTakeAnAdditiveMask) {
  const std::string masked =
      "  %a : f32[1,2,8,8] = aten::masked_fill.Scalar(%c, %b) {value=-inf}\n";
  const std::string dynamo_where = "  %a : f32[1,2,8,8] = aten::where.self(%b, %f, %c)\n";
  const std::string kept_where = "  %a : f32[1,2,8,8] = aten::where.self(%b, %c, %f)\n";
  const std::string finfo_min =
      "  %a : f32[1,2,8,8] = aten::where.ScalarOther(%b, %c) {other=-3.4028234663852886e+38}\n";
  const std::string full_fill =  // transformers' torch.where(mask, scores, torch.full([], min))
      "  %m : f32[] = aten::full() {size=[], fill_value=-3.4028234663852886e+38, dtype=6, "
      "layout=None, device=\"cpu\", pin_memory=false}\n"
      "  %a : f32[1,2,8,8] = aten::where.self(%b, %c, %m)\n";
  const std::string sdpa = "aten::scaled_dot_product_attention(%q, %kt_t, %v, %";
  for (const auto& [fill, mask] :
       {std::pair{masked, "{self=-inf, other=0.0}"},
        std::pair{dynamo_where, "{self=-inf, other=0.0}"},
        std::pair{kept_where, "{self=0.0, other=-inf}"},
        std::pair{finfo_min, "{self=0.0, other=-3.4028234663852886e+38}"},
        std::pair{full_fill, "{self=0.0, other=-3.4028234663852886e+38}"}}) {
    auto g = ir::parse_graph(filled(fill));
    EXPECT_EQ(recognize_attention(*g), 1) << fill;
    const std::string printed = ir::print_graph(*g);
    // The bool mask becomes an additive one that the attention reads; the fill is gone.
    EXPECT_NE(printed.find(" : f32[1,1,8,8] = aten::where.Scalar(%b) " + std::string(mask)),
              std::string::npos)
        << printed;
    EXPECT_NE(printed.find(sdpa), std::string::npos) << printed;
    EXPECT_EQ(printed.find("masked_fill"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("softmax"), std::string::npos) << printed;
  }
  // A fill that a score can outweigh (-1e9: a row masked everywhere would softmax the scores, not
  // the fills), one that is not a constant fill, and a mask that is not bool stay as they are.
  const std::string outweighed =
      "  %a : f32[1,2,8,8] = aten::masked_fill.Scalar(%c, %b) {value=-1000000000.0}\n";
  const std::string tensor_fill = "  %a : f32[1,2,8,8] = aten::where.self(%b, %s, %c)\n";
  std::string float_mask = filled(masked);
  float_mask.replace(float_mask.find("%b : b8"), 7, "%b : f32");
  for (const std::string& text : {filled(outweighed), filled(tensor_fill), float_mask}) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(recognize_attention(*g), 0) << text;
  }
}

}  // namespace
}  // namespace kiln
