// functionalize_owned: in-place ops on memory only the graph holds become functional (GhostNet's
// add into a slice of a fresh cat, SKNet's relu_ whose result is split, Swin's and BART's writes
// into slices of a fresh tensor, which become scatters); those that write a graph input, a
// constant, or memory something else reads afterwards stay in place.
#include "backend/capture/functionalize_owned.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <string>
#include <vector>

#include "support/torchscript_ir.h"

namespace kiln {
namespace {

using testing::count_ops;
using testing::parse_torchscript;
using testing::run_graph;

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
  ASSERT_EQ(count_ops(*graph, "aten::add_"), 1) << "TorchScript's own pass took it: " << *graph;
  EXPECT_EQ(functionalize_owned(graph), 2) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::add_") + count_ops(*graph, "aten::relu_"), 0) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::add"), 1) << *graph;
  // In place the sum keeps %x's dtype: a cast back where the functional add would promote.
  EXPECT_EQ(count_ops(*graph, "aten::type_as"), 1) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::relu"), 1) << *graph;
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
  EXPECT_EQ(count_ops(*graph, "aten::add_") + count_ops(*graph, "aten::relu_"), 0) << *graph;
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
  EXPECT_EQ(count_ops(*graph, "aten::mul"), 1) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::type_as"), 1) << *graph;
}

// Swin's attention mask (a fresh tensor filled block by block, then read) and BART's shifted
// tokens (a copy into a slice, then a fill of a column): the writes become scatters into the
// fresh tensor, whose later readers read the result.
TEST(FunctionalizeOwned, WritesIntoViewsOfAFreshTensorBecomeScatters) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %v : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %four : int = prim::Constant[value=4]()
  %seven : float = prim::Constant[value=7.]()
  %false : bool = prim::Constant[value=0]()
  %m : Tensor = aten::mul(%x, %x)
  %s1 : Tensor = aten::slice(%m, %zero, %zero, %two, %one)
  %s2 : Tensor = aten::select(%s1, %one, %one)
  %f : Tensor = aten::fill_(%s2, %seven)
  %t1 : Tensor = aten::slice(%m, %zero, %two, %four, %one)
  %c : Tensor = aten::copy_(%t1, %v, %false)
  %z : Tensor = aten::select(%m, %one, %zero)
  %zz : Tensor = aten::zero_(%z)
  %out : Tensor = aten::add(%m, %x, %one)
  return (%out))IR");
  const std::vector<at::Tensor> inputs = {at::randn({5, 3}), at::randn({2, 3})};
  const at::Tensor expected = run_graph(graph->copy(), inputs).at(0);
  EXPECT_EQ(functionalize_owned(graph), 3) << *graph;
  torch::jit::EliminateDeadCode(graph);
  for (const char* op : {"aten::fill_", "aten::copy_", "aten::zero_"})
    EXPECT_EQ(count_ops(*graph, op), 0) << op << " " << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::slice_scatter"), 2) << *graph;
  EXPECT_EQ(count_ops(*graph, "aten::select_scatter"), 2) << *graph;
  const at::Tensor got = run_graph(graph, inputs).at(0);
  EXPECT_TRUE(at::equal(got, expected)) << got << expected;
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
           // A write through a view whose result is read, beside the base: made functional,
           // the result would be a tensor of its own that a later write could not carry to the
           // base's readers.
           R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %c : Tensor = aten::mul(%x, %x)
  %v : Tensor = aten::select(%c, %zero, %zero)
  %y : Tensor = aten::relu_(%v)
  %z : Tensor = aten::mul(%c, %x)
  return (%z, %y))IR",
           // A copy from a part of the same tensor: eager refuses the partial overlap.
           R"IR(
graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %false : bool = prim::Constant[value=0]()
  %c : Tensor = aten::mul(%x, %x)
  %a : Tensor = aten::slice(%c, %zero, %zero, %two, %one)
  %b : Tensor = aten::slice(%c, %zero, %one, %two, %one)
  %y : Tensor = aten::copy_(%a, %b, %false)
  return (%c))IR",
       }) {
    auto graph = parse_torchscript(text);
    EXPECT_EQ(functionalize_owned(graph), 0) << *graph;
  }
}

// A frozen module's tensor is a constant of the graph: every call would see the write.
TEST(FunctionalizeOwned, AFillIntoAViewOfAConstantStaysInPlace) {
  auto graph = parse_torchscript(R"IR(
graph(%x : Tensor, %k : Tensor):
  %zero : int = prim::Constant[value=0]()
  %seven : float = prim::Constant[value=7.]()
  %v : Tensor = aten::select(%k, %zero, %zero)
  %y : Tensor = aten::fill_(%v, %seven)
  %z : Tensor = aten::mul(%k, %x)
  return (%z))IR");
  torch::jit::WithInsertPoint at_start(graph->block()->nodes().front());
  graph->inputs()[1]->replaceAllUsesWith(graph->insertConstant(at::ones({2})));
  graph->eraseInput(1);
  EXPECT_EQ(functionalize_owned(graph), 0) << *graph;
}

}  // namespace
}  // namespace kiln
