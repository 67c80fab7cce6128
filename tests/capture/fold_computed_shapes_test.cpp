// fold_computed_shapes on graphs written as TorchScript IR: what it may fold and what it must
// leave to run time.
#include "backend/capture/fold_computed_shapes.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include "support/torchscript_ir.h"

namespace kiln {
namespace {

using testing::parse_torchscript;

c10::Symbol returned_kind(const torch::jit::Graph& graph) {
  return graph.outputs().at(0)->node()->kind();
}

TEST(FoldComputedShapes, SizeArithmeticOnNumbersMadeTensorsFolds) {
  // What a traced `c // 2` looks like.
  auto graph = parse_torchscript(R"IR(
graph(%self : Tensor, %x : Tensor):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %y : Tensor = aten::relu(%x)
  %c : int = aten::size(%y, %one)
  %t : Tensor = prim::NumToTensor(%c)
  %h : Tensor = aten::floor_divide(%t, %two)
  %k : int = aten::Int(%h)
  return (%k))IR");
  EXPECT_TRUE(fold_computed_shapes(*graph, {torch::randn({3, 10})}));
  const torch::jit::Value* out = graph->outputs().at(0);
  ASSERT_EQ(out->node()->kind(), c10::prim::Constant);
  EXPECT_EQ(torch::jit::toIValue(out)->toInt(), 5);
}

TEST(FoldComputedShapes, ANumberMadeTensorWrittenInALoopIsNotFolded) {
  // The loop adds n to t; a run that does not enter loops would read t as n.
  auto graph = parse_torchscript(R"IR(
graph(%self : Tensor, %x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %y : Tensor = aten::relu(%x)
  %n : int = aten::size(%y, %zero)
  %t : Tensor = prim::NumToTensor(%n)
  prim::Loop(%n, %true)
    block0(%i : int):
      %u : Tensor = aten::add_(%t, %one, %one)
      -> (%true)
  %k : int = aten::Int(%t)
  return (%k))IR");
  fold_computed_shapes(*graph, {torch::randn({3, 4})});
  EXPECT_EQ(returned_kind(*graph), c10::aten::Int);
}

TEST(FoldComputedShapes, AnOpThatMayResizeInPlaceStopsIt) {
  auto graph = parse_torchscript(R"IR(
graph(%self : Tensor, %x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %y : Tensor = aten::relu(%x)
  %z : Tensor = aten::unsqueeze_(%y, %zero)
  %n : int = aten::size(%y, %zero)
  return (%n))IR");
  EXPECT_FALSE(fold_computed_shapes(*graph, {torch::randn({3, 4})}));
  EXPECT_EQ(returned_kind(*graph), c10::aten::size);
}

}  // namespace
}  // namespace kiln
