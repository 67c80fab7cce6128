// Graph::clone: a deep copy that prints as the original does and shares nothing with it.
#include <gtest/gtest.h>

#include <set>

#include "passes/fuse_elementwise.h"
#include "passes/ir/graph.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"

namespace kiln::ir {
namespace {

constexpr const char* kGraph =
    "graph(%x : f32[4,8], %y : f32[4,8]{1,4}@cpu):\n"
    "  %w : f32[8] = prim::Constant() {index=0}\n"
    "  %t : f32[4,8] = aten::mul.Tensor(%x, %y)\n"
    "  %u : f32[4,8] = aten::add.Tensor(%t, %w) {alpha=1}\n"
    "  %r : f32[4,8] = aten::relu(%u)\n"
    "  %s : f32[4] = aten::sum.dim_IntList(%r) {dim=[1], keepdim=false, dtype=None}\n"
    "  return (%r, %s)\n";

TEST(GraphCloneTest, PrintsAsTheOriginalWithItsFusionGroups) {
  auto graph = parse_graph(kGraph);
  fuse_elementwise(*graph);
  ASSERT_NE(print_graph(*graph).find(kFusedOp), std::string::npos);
  const auto copy = graph->clone();
  EXPECT_EQ(print_graph(*copy), print_graph(*graph));
  EXPECT_EQ(copy->num_nodes(), graph->num_nodes());
}

TEST(GraphCloneTest, SharesNothingWithTheOriginal) {
  auto graph = parse_graph(kGraph);
  fuse_elementwise(*graph);
  const std::string before = print_graph(*graph);
  auto copy = graph->clone();
  std::set<const Graph*> bodies;
  for (const Node* node : graph->nodes())
    if (node->subgraph()) bodies.insert(node->subgraph());
  ASSERT_FALSE(bodies.empty());
  for (Node* node : copy->nodes()) {
    if (node->subgraph()) EXPECT_FALSE(bodies.contains(node->subgraph()));
    node->set_attr("touched", true);
  }
  copy->set_outputs({copy->inputs()[0]});
  EXPECT_EQ(print_graph(*graph), before);
  for (const Value* input : copy->inputs())
    for (const Value* original : graph->inputs())
      EXPECT_NE(input, original);
}

}  // namespace
}  // namespace kiln::ir
