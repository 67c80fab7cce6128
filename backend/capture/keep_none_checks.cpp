#include "backend/capture/keep_none_checks.h"

#include <vector>

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool is_none_constant(const Value* value) {
  return value->type()->kind() == c10::TypeKind::NoneType;
}

// A value typed Tensor that an op made: it may be undefined, which is None to Python.
bool may_be_undefined(const Value* value) {
  const Node* producer = value->node();
  return value->type()->cast<c10::TensorType>() && producer->kind() != c10::prim::Constant &&
         producer->kind() != c10::prim::Param && producer->maybeSchema();
}

void collect(torch::jit::Block* block, std::vector<Node*>& checks) {
  for (Node* node : block->nodes()) {
    for (torch::jit::Block* inner : node->blocks())
      collect(inner, checks);
    const bool is = node->kind() == c10::aten::__is__;
    if ((!is && node->kind() != c10::aten::__isnot__) || node->inputs().size() != 2) continue;
    for (size_t i = 0; i < 2; ++i) {
      if (is_none_constant(node->input(1 - i)) && may_be_undefined(node->input(i))) {
        checks.push_back(node);
        break;
      }
    }
  }
}

}  // namespace

int keep_none_checks(torch::jit::Graph& graph) {
  static const c10::Symbol is_none = c10::Symbol::fromQualString("kiln::is_none");
  std::vector<Node*> checks;
  collect(graph.block(), checks);
  for (Node* check : checks) {
    Value* tensor = is_none_constant(check->input(0)) ? check->input(1) : check->input(0);
    torch::jit::WithInsertPoint at(check);
    Value* result = graph.insertNode(graph.create(is_none, {tensor}, 1))->output();
    result->setType(c10::BoolType::get());
    if (check->kind() == c10::aten::__isnot__) {
      result = graph.insert(c10::aten::__not__, {result});
    }
    check->output()->replaceAllUsesWith(result);
    check->destroy();
  }
  return static_cast<int>(checks.size());
}

}  // namespace kiln
