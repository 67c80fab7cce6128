#include "backend/capture/unpack_constant_lists.h"

#include <torch/csrc/jit/ir/constants.h>

#include <vector>

#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void unpack_in(torch::jit::Block* block, torch::jit::Graph& graph, int& unpacked) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* inner : node->blocks())
      unpack_in(inner, graph, unpacked);
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      Value* list = node->input(i);
      const c10::TypePtr& type = list->type();
      if (list->node()->kind() != c10::prim::Constant ||
          !(is_tensor_list_type(type) || is_optional_tensor_list_type(type))) {
        continue;
      }
      const std::optional<c10::IValue> value = torch::jit::toIValue(list);
      if (!value || !value->isList()) continue;
      torch::jit::WithInsertPoint at(node);
      std::vector<Value*> elements;
      for (const c10::IValue& element : value->toListRef())
        elements.push_back(graph.insertConstant(element));
      Node* built = graph.insertNode(
          graph.createList(type->expectRef<c10::ListType>().getElementType(), elements));
      node->replaceInput(i, built->output());
      ++unpacked;
    }
  }
}

}  // namespace

int unpack_constant_lists(torch::jit::Graph& graph) {
  int unpacked = 0;
  unpack_in(graph.block(), graph, unpacked);
  return unpacked;
}

}  // namespace kiln
