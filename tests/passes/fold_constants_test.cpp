#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/fold_constants.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln {
namespace {

// An evaluator that records what it was asked and hands out new indices from 10.
struct FakeEvaluator {
  std::vector<std::string> calls;
  int64_t next = 10;
  ConstantEvaluator get() {
    return [this](const ir::Node& node, const std::vector<int64_t>& inputs) {
      std::string call = node.op() + "(";
      for (int64_t i : inputs)
        call += std::to_string(i) + ",";
      calls.push_back(call + ")");
      return std::optional<int64_t>(next++);
    };
  }
};

TEST(FoldConstantsTest, FoldsChainsOfOpsOnConstants) {
  auto g = ir::parse_graph(
      "graph(%x : f32[2,8]):\n"
      "  %w : f32[4,8] = prim::Constant() {index=0}\n"
      "  %s : f32[4,1] = prim::Constant() {index=1}\n"
      "  %r : f32[4,1] = aten::rsqrt(%s)\n"
      "  %v : f32[4,8] = aten::mul.Tensor(%w, %r)\n"
      "  %y : f32[2,4] = aten::linear(%x, %v) {bias=None}\n"
      "  return (%y)\n");
  FakeEvaluator evaluator;
  EXPECT_EQ(fold_constants(*g, evaluator.get()), 2);
  EXPECT_EQ(evaluator.calls,
            (std::vector<std::string>{"aten::rsqrt(1,)", "aten::mul.Tensor(0,10,)"}));
  EXPECT_EQ(ir::print_graph(*g),
            "graph(%x : f32[2,8]):\n"
            "  %w : f32[4,8] = prim::Constant() {index=0}\n"
            "  %s : f32[4,1] = prim::Constant() {index=1}\n"
            "  %r : f32[4,1] = prim::Constant() {index=10}\n"
            "  %v : f32[4,8] = prim::Constant() {index=11}\n"
            "  %y : f32[2,4] = aten::linear(%x, %v) {bias=None}\n"
            "  return (%y)\n");
}

// A returned value must be a tensor of its own each call (the caller may write it): what reaches
// an output, directly or through views, is computed at run time; what feeds it still folds.
TEST(FoldConstantsTest, LeavesWhatTheGraphReturnsToRunTime) {
  auto g = ir::parse_graph(
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %r : f32[4] = aten::relu(%w)\n"
      "  %c : f32[4] = aten::clone(%r) {memory_format=None}\n"
      "  %s : f32[2] = aten::slice.Tensor(%c) {dim=0, start=0, end=2, step=1}\n"
      "  %t : f32[4] = aten::exp(%w)\n"
      "  return (%s, %t)\n");
  FakeEvaluator evaluator;
  EXPECT_EQ(fold_constants(*g, evaluator.get()), 1);
  EXPECT_EQ(evaluator.calls, (std::vector<std::string>{"aten::relu(0,)"}));
  const std::string printed = ir::print_graph(*g);
  for (const char* kept : {"aten::clone", "aten::slice.Tensor", "aten::exp"})
    EXPECT_NE(printed.find(kept), std::string::npos) << kept << "\n" << printed;
}

TEST(FoldConstantsTest, LeavesOpsThatReadAGraphInput) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %y : f32[4] = aten::mul.Tensor(%x, %w)\n"
      "  return (%y)\n";
  auto g = ir::parse_graph(text);
  FakeEvaluator evaluator;
  EXPECT_EQ(fold_constants(*g, evaluator.get()), 0);
  EXPECT_TRUE(evaluator.calls.empty());
  EXPECT_EQ(ir::print_graph(*g), text);
}

TEST(FoldConstantsTest, LeavesOpsOutsideTheOpTable) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %r : f32[4] = aten::bernoulli(%w) {generator=None}\n"
      "  %y : f32[4] = aten::mul.Tensor(%x, %r)\n"
      "  return (%y)\n";
  auto g = ir::parse_graph(text);
  FakeEvaluator evaluator;
  EXPECT_EQ(fold_constants(*g, evaluator.get()), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

// A mask built from sizes alone (Swin's shifted windows): a zeros of the input's type, written
// through slices. The pure extern ops fold; the input is read for its type only (-1). A random
// factory and a factory larger than a megabyte stay.
TEST(FoldConstantsTest, FoldsMasksBuiltFromSizesAlone) {
  auto g = ir::parse_graph(
      "graph(%x : f32[8,8]):\n"
      "  %z : f32[8,8] = aten::new_zeros(%x) {size=[8,8], dtype=None, layout=None, device=None, "
      "pin_memory=false}\n"
      "  %v : f32[] = prim::Constant() {index=0}\n"
      "  %s : f32[4,8] = aten::slice.Tensor(%z) {dim=0, start=0, end=4, step=1}\n"
      "  %f : f32[4,8] = aten::fill.Tensor(%s, %v)\n"
      "  %m : f32[8,8] = aten::slice_scatter(%z, %f) {dim=0, start=0, end=4, step=1}\n"
      "  %r : f32[8,8] = aten::rand() {size=[8,8], dtype=6, layout=0, device=\"cpu\", "
      "pin_memory=false}\n"
      "  %big : f32[1024,1024] = aten::full() {size=[1024,1024], fill_value=1, dtype=6, "
      "layout=0, device=\"cpu\", pin_memory=false}\n"
      "  %a : f32[8,8] = aten::add.Tensor(%x, %m) {alpha=1}\n"
      "  %b : f32[8,8] = aten::add.Tensor(%a, %r) {alpha=1}\n"
      "  return (%b, %big)\n");
  FakeEvaluator evaluator;
  EXPECT_EQ(fold_constants(*g, evaluator.get()), 4);
  EXPECT_EQ(evaluator.calls,
            (std::vector<std::string>{"aten::new_zeros(-1,)", "aten::slice.Tensor(10,)",
                                      "aten::fill.Tensor(11,0,)", "aten::slice_scatter(10,12,)"}));
  const std::string printed = ir::print_graph(*g);
  for (const char* kept : {"aten::rand", "aten::full", "aten::add.Tensor(%x, %m)"})
    EXPECT_NE(printed.find(kept), std::string::npos) << kept << "\n" << printed;
}

// A relative position bias: a small table of weights indexed by a constant buffer into a bias
// of 1.2 MB (GC-ViT's 14x14 windows, 8 heads) folds; one past 16 MB stays.
TEST(FoldConstantsTest, FoldsGathersFromWeightTablesUpTo16MB) {
  auto g = ir::parse_graph(
      "graph(%x : f32[8,38416]):\n"
      "  %table : f32[729,8] = prim::Constant() {index=0}\n"
      "  %index : i64[38416] = prim::Constant() {index=1}\n"
      "  %bias : f32[38416,8] = aten::index.Tensor(%table, %index) {indices=[true]}\n"
      "  %wide : i64[600000] = prim::Constant() {index=2}\n"
      "  %big : f32[600000,8] = aten::index.Tensor(%table, %wide) {indices=[true]}\n"
      "  %t : f32[8,38416] = aten::permute(%bias) {dims=[1,0]}\n"
      "  %y : f32[8,38416] = aten::add.Tensor(%x, %t) {alpha=1}\n"
      "  %s : f32[8] = aten::sum.dim_IntList(%big) {dim=[0], keepdim=false, dtype=None}\n"
      "  return (%y, %s)\n");
  FakeEvaluator evaluator;
  fold_constants(*g, evaluator.get());
  ASSERT_FALSE(evaluator.calls.empty());
  EXPECT_EQ(evaluator.calls[0], "aten::index.Tensor(0,1,)");
  for (const std::string& call : evaluator.calls)
    EXPECT_NE(call, "aten::index.Tensor(0,2,)");
}

TEST(FoldConstantsTest, LeavesResultsMuchLargerThanTheirInputs) {
  const std::string text =
      "graph(%x : f32[1024,1024]):\n"
      "  %c : f32[1] = prim::Constant() {index=0}\n"
      "  %e : f32[1024,1024]{0,0} = aten::expand(%c) {size=[1024,1024], implicit=false}\n"
      "  %f : f32[1024,1024] = aten::contiguous(%e) {memory_format=0}\n"
      "  %y : f32[1024,1024] = aten::mul.Tensor(%x, %f)\n"
      "  return (%y)\n";
  auto g = ir::parse_graph(text);
  FakeEvaluator evaluator;
  fold_constants(*g, evaluator.get());
  // The expand is a view (no bytes of its own to speak of) but 4 MB as a tensor type: kept.
  EXPECT_EQ(evaluator.calls.size(), 0u);
}

TEST(FoldConstantsTest, AnEvaluatorThatCannotKeepsTheNode) {
  const std::string text =
      "graph(%x : f32[4]):\n"
      "  %w : f32[4] = prim::Constant() {index=0}\n"
      "  %r : f32[4] = aten::exp(%w)\n"
      "  %y : f32[4] = aten::mul.Tensor(%x, %r)\n"
      "  return (%y)\n";
  auto g = ir::parse_graph(text);
  ConstantEvaluator refuse = [](const ir::Node&, const std::vector<int64_t>&) {
    return std::optional<int64_t>();
  };
  EXPECT_EQ(fold_constants(*g, refuse), 0);
  EXPECT_EQ(ir::print_graph(*g), text);
}

}  // namespace
}  // namespace kiln
