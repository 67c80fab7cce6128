// functionalize_owned: in-place ops on memory only the graph holds become functional (GhostNet's
// add into a slice of a fresh cat, SKNet's relu_ whose result is split); those that write a
// graph input, a constant, or memory something reads afterwards stay in place.
#include "backend/capture/functionalize_owned.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <string>

#include "support/torchscript_ir.h"

namespace kiln {
namespace {

using testing::parse_torchscript;

int count(const torch::jit::Graph& graph, const char* op) {
  int n = 0;
  for (const torch::jit::Node* node : graph.nodes())
    n += node->kind().toQualString() == std::string(op);
  return n;
}

TEST(FunctionalizeOwned, AnAddIntoASliceOfAFreshCatBecomesFunctional) {
  auto graph = parse_torchscript(R"IR(
graph(%a : Tensor, %b : Tensor, %s : Tensor):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %end : int = prim::Constant[value=16]()
  %parts : Tensor[] = prim::ListConstruct(%a, %b)
  %cat : Tensor = aten::cat(%parts, %one)
  %x : Tensor = aten::slice(%cat, %one, %zero, %end, %one)
  %y : Tensor = aten::add_(%x, %s, %one)
  %r : Tensor = aten::relu_(%y)
  return (%r))IR");
  torch::jit::RemoveTensorMutation(graph);
  ASSERT_EQ(count(*graph, "aten::add_"), 1) << "TorchScript's own pass took it: " << *graph;
  EXPECT_EQ(functionalize_owned(graph), 2) << *graph;
  EXPECT_EQ(count(*graph, "aten::add_") + count(*graph, "aten::relu_"), 0) << *graph;
  EXPECT_EQ(count(*graph, "aten::add"), 1) << *graph;
  // In place the sum keeps %x's dtype: a cast back where the functional add would promote.
  EXPECT_EQ(count(*graph, "aten::type_as"), 1) << *graph;
  EXPECT_EQ(count(*graph, "aten::relu"), 1) << *graph;
}

TEST(FunctionalizeOwned, AReluWhoseResultIsSplitBecomesFunctional) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %w : Tensor, %s : Tensor):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %c : Tensor = aten::mul(%x, %w)
  %sum : Tensor = aten::add_(%c, %s, %one)
  %r : Tensor = aten::relu_(%sum)
  %parts : Tensor[] = aten::split(%r, %two, %one)
  %p : Tensor, %q : Tensor = prim::ListUnpack(%parts)
  %out : Tensor = aten::mul(%p, %q)
  return (%out))IR");
  EXPECT_EQ(functionalize_owned(graph), 2) << *graph;
  EXPECT_EQ(count(*graph, "aten::add_") + count(*graph, "aten::relu_"), 0) << *graph;
}

// Returned in a tuple beside another value, which the tuple does not make an alias of it.
TEST(FunctionalizeOwned, AProductIntoASliceOfACatOfInputsIsCastBackToItsDtype) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %d : Tensor):
  %three : int = prim::Constant[value=3]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x, %x)
  %cat : Tensor = aten::cat(%l, %one)
  %z : Tensor = aten::slice(%cat, %one, %zero, %three, %one)
  %e : Tensor = aten::slice(%d, %one, %zero, %three, %one)
  %r : Tensor = aten::relu(%x)
  %p : Tensor = aten::mul_(%z, %e)
  %out : (Tensor, Tensor) = prim::TupleConstruct(%r, %p)
  return (%out))IR");
  EXPECT_EQ(functionalize_owned(graph), 1) << *graph;
  EXPECT_EQ(count(*graph, "aten::mul"), 1) << *graph;
  EXPECT_EQ(count(*graph, "aten::type_as"), 1) << *graph;
}

TEST(FunctionalizeOwned, WritesThatSomethingCanSeeStayInPlace) {
  for (const char* text : {
           // A graph input: the caller sees the write.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::relu_(%x)
  return (%y))IR",
           // A view of a graph input.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %v : Tensor = aten::select(%x, %zero, %zero)
  %y : Tensor = aten::relu_(%v)
  return (%y))IR",
           // A fresh tensor read again after the write, through a view made before it.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %c : Tensor = aten::mul(%x, %x)
  %v : Tensor = aten::select(%c, %zero, %zero)
  %y : Tensor = aten::relu_(%c)
  %z : Tensor = aten::mul(%v, %y)
  return (%z))IR",
           // A fresh tensor held in a list that is read after the write.
           R"IR(
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %c : Tensor = aten::mul(%x, %x)
  %l : Tensor[] = prim::ListConstruct(%c, %x)
  %y : Tensor = aten::relu_(%c)
  %z : Tensor = aten::cat(%l, %one)
  return (%z, %y))IR",
       }) {
    auto graph = parse_torchscript(text);
    EXPECT_EQ(functionalize_owned(graph), 0) << *graph;
  }
}

}  // namespace
}  // namespace kiln
