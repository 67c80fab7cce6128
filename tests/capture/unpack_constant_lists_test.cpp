// unpack_constant_lists: a constant tensor list an op reads (freezing's `x[..., idx]` index list)
// becomes a ListConstruct of one constant per element, None kept, which the partitioner takes
// into a region; a list of numbers stays a constant.
#include "backend/capture/unpack_constant_lists.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/constants.h>

#include "support/torchscript_ir.h"

namespace kiln {
namespace {

TEST(UnpackConstantLists, AConstantIndexListIsBuiltElementByElement) {
  auto graph = testing::parse_torchscript(R"IR(
graph(%x : Tensor):
  %sizes : int[] = prim::Constant[value=[2, 3]]()
  %v : Tensor = aten::view(%x, %sizes)
  %l : Tensor?[] = prim::ListConstruct()
  %y : Tensor = aten::index(%v, %l)
  return (%y))IR");
  // What freezing leaves: the index list as one constant, [None, tensor([2, 0])].
  torch::jit::Node* index = graph->outputs()[0]->node();
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(std::nullopt);
  indices.push_back(at::tensor({2, 0}));
  {
    torch::jit::WithInsertPoint at(index);
    index->replaceInput(1, graph->insertConstant(c10::IValue(indices)));
  }
  EXPECT_EQ(unpack_constant_lists(*graph), 1) << *graph;
  const torch::jit::Node* list = index->input(1)->node();
  ASSERT_EQ(list->kind(), c10::prim::ListConstruct) << *graph;
  ASSERT_EQ(list->inputs().size(), 2u);
  EXPECT_EQ(list->input(0)->type()->kind(), c10::TypeKind::NoneType);
  EXPECT_TRUE(at::equal(torch::jit::toIValue(list->input(1))->toTensor(), at::tensor({2, 0})));
  EXPECT_EQ(index->input(0)->node()->input(1)->node()->kind(), c10::prim::Constant)
      << "a list of numbers stays a constant";

  const at::Tensor x = at::arange(6).to(at::kFloat);
  torch::jit::Code code(graph, "test");
  torch::jit::Stack stack = {x};
  torch::jit::InterpreterState(code).run(stack);
  EXPECT_TRUE(at::equal(stack.at(0).toTensor(),
                        x.view({2, 3}).index({at::indexing::Slice(), at::tensor({2, 0})})));
}

}  // namespace
}  // namespace kiln
