#include <string>

#include <gtest/gtest.h>

#include "passes/eliminate_common_subexpressions.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

TEST(EliminateCommonSubexpressionsTest, MergesTheSameOpOnTheSameInputs) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::exp(%x)\n"
      "  %c : f32[4] = aten::add.Tensor(%a, %b) {alpha=1}\n"
      "  return (%c)\n");
  EXPECT_EQ(eliminate_common_subexpressions(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %a : f32[4] = aten::exp(%x)\n"
            "  %c : f32[4] = aten::add.Tensor(%a, %a) {alpha=1}\n"
            "  return (%c)\n");
}

TEST(EliminateCommonSubexpressionsTest, DifferentAttributesAreDifferent) {
  const std::string text =
      "graph(%x : f32[4,2]):\n"
      "  %a : f32[4] = aten::sum.dim_IntList(%x) {dim=[1], keepdim=false, dtype=None}\n"
      "  %b : f32[2] = aten::sum.dim_IntList(%x) {dim=[0], keepdim=false, dtype=None}\n"
      "  return (%a, %b)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(eliminate_common_subexpressions(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(EliminateCommonSubexpressionsTest, MergesWholeChainsInOnePass) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::neg(%a)\n"
      "  %c : f32[4] = aten::exp(%x)\n"
      "  %d : f32[4] = aten::neg(%c)\n"
      "  %e : f32[4] = aten::mul.Tensor(%b, %d)\n"
      "  return (%e)\n");
  EXPECT_EQ(eliminate_common_subexpressions(*g), 2);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %a : f32[4] = aten::exp(%x)\n"
            "  %b : f32[4] = aten::neg(%a)\n"
            "  %e : f32[4] = aten::mul.Tensor(%b, %b)\n"
            "  return (%e)\n");
}

TEST(EliminateCommonSubexpressionsTest, LeavesOpsOutsideTheOpTable) {
  // rand_like-style ops are not pure: two calls give two tensors.
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::bernoulli(%x) {generator=None}\n"
      "  %b : f32[4] = aten::bernoulli(%x) {generator=None}\n"
      "  %c : f32[4] = aten::add.Tensor(%a, %b) {alpha=1}\n"
      "  return (%c)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(eliminate_common_subexpressions(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(EliminateCommonSubexpressionsTest, EachGraphOutputStaysItsOwnTensor) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::exp(%x)\n"
      "  return (%a, %b)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(eliminate_common_subexpressions(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(EliminateCommonSubexpressionsTest, MergesConstantsWithTheSameIndex) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %v : f32[4] = prim::Constant() {index=0}\n"
      "  %a : f32[4] = aten::mul.Tensor(%x, %w)\n"
      "  %b : f32[4] = aten::add.Tensor(%a, %v) {alpha=1}\n"
      "  return (%b)\n");
  EXPECT_EQ(eliminate_common_subexpressions(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %w : f32[4] = prim::Constant() {index=0}\n"
            "  %a : f32[4] = aten::mul.Tensor(%x, %w)\n"
            "  %b : f32[4] = aten::add.Tensor(%a, %w) {alpha=1}\n"
            "  return (%b)\n");
}

}  // namespace
}  // namespace kiln
