#include <string>

#include <gtest/gtest.h>

#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/recognize_gelu.h"

namespace kiln {
namespace {

// transformers' NewGELUActivation as dynamo hands it over, canonicalized.
std::string new_gelu(const std::string& dtype, const std::string& pow_input = "x",
                     const std::string& sum = "%x, %c") {
  const std::string t = dtype + "[2,8]";
  return "graph(%x : " + t + "):\n" + "  %h : " + t + " = aten::mul.Scalar(%x) {other=0.5}\n" +
         "  %p : " + t + " = aten::pow.Tensor_Scalar(%" + pow_input + ") {exponent=3.0}\n" +
         "  %c : " + t + " = aten::mul.Scalar(%p) {other=0.044714999999999998}\n" + "  %s : " + t +
         " = aten::add.Tensor(" + sum + ") {alpha=1}\n" + "  %u : " + t +
         " = aten::mul.Scalar(%s) {other=0.79788456080286541}\n" + "  %t : " + t +
         " = aten::tanh(%u)\n" + "  %o : " + t + " = aten::add.Scalar(%t) {other=1.0, alpha=1}\n" +
         "  %y : " + t + " = aten::mul.Tensor(%o, %h)\n" + "  return (%y)\n";
}

TEST(RecognizeGeluTest, TheTanhFormWrittenOutBecomesOneGelu) {
  auto g = ir::parse_graph(new_gelu("f32"));
  EXPECT_EQ(recognize_gelu(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[2,8]):\n"
            "  %y : f32[2,8] = aten::gelu(%x) {approximate=\"tanh\"}\n"
            "  return (%y)\n");
  // The sum's operands in the other order, and sqrt(2 / pi) as 0.7978845608 in source.
  std::string swapped = new_gelu("f32", "x", "%c, %x");
  swapped.replace(swapped.find("0.79788456080286541"), 19, "0.7978845608");
  g = ir::parse_graph(swapped);
  EXPECT_EQ(recognize_gelu(*g), 1) << ir::print_graph(*g);
}

TEST(RecognizeGeluTest, WhatIsNotExactlyTheFormulaStaysAsItIs) {
  const std::string cases[] = {
      new_gelu("bf16"),      // eager rounds after every op
      new_gelu("f32", "h"),  // the cube of another value
      [] {                   // another coefficient
        std::string text = new_gelu("f32");
        text.replace(text.find("0.044714999999999998"), 20, "0.05");
        return text;
      }(),
      [] {  // a value the pattern uses read elsewhere
        std::string text = new_gelu("f32");
        text.replace(text.find("return (%y)"), 11, "return (%y, %t)");
        return text;
      }(),
  };
  for (const std::string& text : cases) {
    auto g = ir::parse_graph(text);
    EXPECT_EQ(recognize_gelu(*g), 0) << text;
    EXPECT_EQ(ir::print_graph(*g), ir::print_graph(*ir::parse_graph(text)));
  }
}

}  // namespace
}  // namespace kiln
