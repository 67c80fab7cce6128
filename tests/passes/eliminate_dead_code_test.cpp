#include <string>

#include <gtest/gtest.h>

#include "passes/eliminate_dead_code.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

TEST(EliminateDeadCodeTest, RemovesAnUnusedNode) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %1 : f32[4] = aten::exp(%x)\n"
      "  %2 : f32[4] = aten::relu(%x)\n"
      "  return (%2)\n");
  EXPECT_EQ(eliminate_dead_code(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %2 : f32[4] = aten::relu(%x)\n"
            "  return (%2)\n");
}

TEST(EliminateDeadCodeTest, RemovesAWholeDeadChain) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::relu(%a)\n"
      "  %c : f32[4] = aten::neg(%b)\n"
      "  %d : f32[4] = aten::abs(%x)\n"
      "  return (%d)\n");
  EXPECT_EQ(eliminate_dead_code(*g), 3);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %d : f32[4] = aten::abs(%x)\n"
            "  return (%d)\n");
}

TEST(EliminateDeadCodeTest, KeepsProducersOfLiveValues) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::relu(%a)\n"
      "  return (%b)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(eliminate_dead_code(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(EliminateDeadCodeTest, OneUsedOutputKeepsAMultiOutputNode) {
  const std::string text =
      "graph(%x : f32[2,4]):\n"
      "  %values : f32[2], %indices : i64[2] = aten::max.dim(%x) {dim=1, keepdim=false}\n"
      "  return (%indices)\n";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(eliminate_dead_code(*g), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(EliminateDeadCodeTest, UnusedConstantsAreRemoved) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %u : f32[4] = prim::Constant() {index=1}\n"
      "  %y : f32[4] = aten::mul.Tensor(%x, %w)\n"
      "  return (%y)\n");
  EXPECT_EQ(eliminate_dead_code(*g), 1);
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[4]):\n"
            "  %w : f32[4] = prim::Constant() {index=0}\n"
            "  %y : f32[4] = aten::mul.Tensor(%x, %w)\n"
            "  return (%y)\n");
}

TEST(EliminateDeadCodeTest, GraphReturningItsInputLosesEveryNode) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4], %unused : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::exp(%unused)\n"
      "  return (%x)\n");
  EXPECT_EQ(eliminate_dead_code(*g), 2);
  // Graph inputs are part of the signature and stay, used or not.
  EXPECT_EQ(ir::print_graph(*g), "graph(%x : f32[4], %unused : f32[4]):\n  return (%x)\n");
}

TEST(EliminateDeadCodeTest, RunningTwiceRemovesNothingMore) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %a : f32[4] = aten::exp(%x)\n"
      "  %b : f32[4] = aten::relu(%x)\n"
      "  return (%b)\n");
  ASSERT_EQ(eliminate_dead_code(*g), 1);
  EXPECT_EQ(eliminate_dead_code(*g), 0);
  EXPECT_EQ(g->num_nodes(), 1u);
}

}  // namespace
}  // namespace kiln
