#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "passes/ir/errors.h"
#include "passes/ir/parser.h"
#include "passes/ir/verifier.h"

namespace kiln::ir {
namespace {

using Problems = std::vector<std::string>;

TensorType f32(std::vector<int64_t> sizes) {
  return make_contiguous(DType::Float32, std::move(sizes));
}

TEST(VerifierTest, ValidGraphHasNoProblems) {
  auto g = parse_graph(
      "graph(%x : f32[2,3]):\n"
      "  %w : f32[4,3] = prim::Constant() {index=0}\n"
      "  %y : f32[2,4] = aten::linear(%x, %w) {bias=None}\n"
      "  %z : f32[2,4] = aten::relu(%y)\n"
      "  %c : f32[4,4] = aten::cat(%z, %z) {tensors=2, dim=0}\n"
      "  %e : f32[2,4] = ext::custom(%z, %z, %z)\n"
      "  return (%c, %e)\n");
  EXPECT_EQ(verify_graph(*g), Problems{});
}

TEST(GraphTest, SetNodeOrderMovesNodesOrRefusesAndChangesNothing) {
  auto g = parse_graph(
      "graph(%x : f32[2]):\n"
      "  %a : f32[2] = aten::relu(%x)\n"
      "  %b : f32[2] = aten::neg(%x)\n"
      "  %c : f32[2] = aten::add.Tensor(%a, %b) {alpha=1}\n"
      "  return (%c)\n");
  const std::vector<Node*> nodes = g->nodes();
  g->set_node_order({nodes[1], nodes[0], nodes[2]});
  EXPECT_EQ(g->nodes()[0]->op(), "aten::neg");
  EXPECT_EQ(g->nodes()[1]->op(), "aten::relu");
  EXPECT_EQ(verify_graph(*g), Problems{});
  // A node twice, or one missing: refused, and the order stays as it was.
  EXPECT_THROW(g->set_node_order({nodes[1], nodes[1], nodes[2]}), std::invalid_argument);
  EXPECT_THROW(g->set_node_order({nodes[1], nodes[0]}), std::invalid_argument);
  EXPECT_EQ(g->nodes()[0]->op(), "aten::neg");
  EXPECT_EQ(g->nodes()[1]->op(), "aten::relu");
  EXPECT_EQ(g->nodes()[2]->op(), "aten::add.Tensor");
}

TEST(VerifierTest, ValueFromAnotherGraph) {
  Graph other;
  Value* foreign = other.add_input(f32({2}), "foreign");
  Graph g;
  g.add_output(g.append("aten::relu", {foreign}, {f32({2})})->output());
  EXPECT_EQ(verify_graph(g),
            Problems{"node 0 (aten::relu) reads %foreign, which is not defined in this graph."});
}

TEST(VerifierTest, UseBeforeDefinition) {
  Graph g;
  Value* x = g.add_input(f32({2}), "x");
  Node* first = g.append("aten::relu", {x}, {f32({2})});
  Node* second = g.append("aten::exp", {x}, {f32({2})});
  first->replace_input(0, second->output());
  g.add_output(first->output());
  EXPECT_EQ(verify_graph(g),
            Problems{"node 0 (aten::relu) reads %2 before it is defined by node 1 (aten::exp)."});
}

TEST(VerifierTest, NodeReadingItsOwnOutput) {
  Graph g;
  Value* x = g.add_input(f32({2}), "x");
  Node* node = g.append("aten::relu", {x}, {f32({2})});
  node->replace_input(0, node->output());
  g.add_output(node->output());
  EXPECT_EQ(verify_graph(g), Problems{"node 0 (aten::relu) reads its own output %1."});
}

TEST(VerifierTest, NullInput) {
  Graph g;
  Value* x = g.add_input(f32({2}), "x");
  Node* node = g.append("aten::relu", {x}, {f32({2})});
  node->replace_input(0, nullptr);
  g.add_output(node->output());
  EXPECT_EQ(verify_graph(g), Problems{"node 0 (aten::relu) has a null input 0."});
}

TEST(VerifierTest, GraphOutputNotDefinedHere) {
  Graph other;
  Value* foreign = other.add_input(f32({2}));
  Graph g;
  g.add_input(f32({2}), "x");
  g.add_output(foreign);
  EXPECT_EQ(verify_graph(g), Problems{"graph output 0 (%0) is not defined in this graph."});
}

TEST(VerifierTest, WrongInputCountForRelu) {
  auto g = parse_graph("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x, %x)\n  return (%1)\n");
  EXPECT_EQ(verify_graph(*g),
            Problems{"node 0 (aten::relu) has 2 tensor inputs, but aten::relu takes 1."});
}

TEST(VerifierTest, InputCountBelowARange) {
  auto g =
      parse_graph("graph(%x : f32[2,3]):\n  %1 : f32[2,2] = aten::linear(%x)\n  return (%1)\n");
  EXPECT_EQ(verify_graph(*g),
            Problems{"node 0 (aten::linear) has 1 tensor inputs, but aten::linear takes 2 to 3."});
}

TEST(VerifierTest, VariadicOpNeedsItsMinimum) {
  auto g = parse_graph("graph():\n  %0 : f32[0] = aten::cat() {tensors=0, dim=0}\n  return (%0)\n");
  EXPECT_EQ(verify_graph(*g),
            Problems{"node 0 (aten::cat) has 0 tensor inputs, but aten::cat takes at least 1."});
}

TEST(VerifierTest, WrongOutputCount) {
  auto g = parse_graph(
      "graph(%x : f32[2]):\n  %1 : f32[2], %2 : f32[2] = aten::relu(%x)\n  return (%1)\n");
  EXPECT_EQ(verify_graph(*g),
            Problems{"node 0 (aten::relu) has 2 outputs, but aten::relu produces 1."});
}

TEST(VerifierTest, UnqualifiedOperatorName) {
  Graph g;
  Value* x = g.add_input(f32({2}), "x");
  g.add_output(g.append("relu", {x}, {f32({2})})->output());
  EXPECT_EQ(verify_graph(g), Problems{"node 0 has the operator name 'relu', which is not of "
                                      "the form 'namespace::name[.overload]'."});
}

TEST(VerifierTest, ConstantWithoutIndex) {
  auto g = parse_graph("graph():\n  %0 : f32[2] = prim::Constant()\n  return (%0)\n");
  EXPECT_EQ(verify_graph(*g),
            Problems{"node 0 (prim::Constant) has no integer attribute 'index' naming its "
                     "frozen tensor."});
}

TEST(VerifierTest, ConstantWithNonIntegerIndex) {
  auto g = parse_graph("graph():\n  %0 : f32[2] = prim::Constant() {index=1.0}\n  return (%0)\n");
  Problems problems = verify_graph(*g);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("has no integer attribute 'index'"), std::string::npos) << problems[0];
}

TEST(VerifierTest, ConstantWithNegativeIndex) {
  auto g = parse_graph("graph():\n  %0 : f32[2] = prim::Constant() {index=-1}\n  return (%0)\n");
  EXPECT_EQ(verify_graph(*g), Problems{"node 0 (prim::Constant) has the negative index -1."});
}

TEST(VerifierTest, StridesOfTheWrongRank) {
  Graph g;
  TensorType bad = f32({2, 3});
  bad.strides = {1};
  g.add_output(g.add_input(bad, "x"));
  EXPECT_EQ(verify_graph(g), Problems{"the type of graph input 0 (%x) has 1 strides for 2 sizes."});
}

TEST(VerifierTest, NegativeSizeInANodeOutput) {
  auto g = parse_graph("graph(%x : f32[2]):\n  %1 : f32[-1,2] = aten::view(%x)\n  return (%1)\n");
  EXPECT_EQ(verify_graph(*g), Problems{"the type of %1 (output 0 of node 0, aten::view) has a "
                                       "negative size: f32[-1,2]."});
}

TEST(VerifierTest, ReportsEveryProblem) {
  Graph other;
  Value* foreign = other.add_input(f32({2}));
  Graph g;
  Value* x = g.add_input(f32({2}), "x");
  g.append("relu", {x}, {f32({2})});
  g.append("aten::exp", {x, x}, {f32({2})});
  g.add_output(foreign);
  EXPECT_EQ(verify_graph(g).size(), 3u);
}

TEST(CheckGraphTest, ValidGraphDoesNotThrow) {
  auto g = parse_graph("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x)\n  return (%1)\n");
  EXPECT_NO_THROW(check_graph(*g, "some_pass"));
}

TEST(CheckGraphTest, MessageNamesThePassAndListsProblems) {
  auto g = parse_graph(
      "graph(%x : f32[2]):\n"
      "  %1 : f32[2] = aten::relu(%x, %x)\n"
      "  %2 : f32[2] = prim::Constant()\n"
      "  return (%1, %2)\n");
  try {
    check_graph(*g, "fuse");
    FAIL() << "check_graph did not throw";
  } catch (const VerifyError& e) {
    EXPECT_EQ(std::string(e.what()),
              "graph IR is invalid after pass 'fuse':\n"
              "  - node 0 (aten::relu) has 2 tensor inputs, but aten::relu takes 1.\n"
              "  - node 1 (prim::Constant) has no integer attribute 'index' naming its frozen "
              "tensor.");
  }
}

TEST(CheckGraphTest, MessageWithoutPass) {
  auto g = parse_graph("graph(%x : f32[2]):\n  %1 : f32[2] = aten::relu(%x, %x)\n  return (%1)\n");
  try {
    check_graph(*g);
    FAIL() << "check_graph did not throw";
  } catch (const VerifyError& e) {
    EXPECT_EQ(std::string(e.what()),
              "graph IR is invalid:\n"
              "  - node 0 (aten::relu) has 2 tensor inputs, but aten::relu takes 1.");
  }
}

}  // namespace
}  // namespace kiln::ir
