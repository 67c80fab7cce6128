#include "backend/capture/fresh_returns.h"

#include <unordered_map>

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool is_container(const Node* node) {
  return node->kind() == torch::jit::prim::TupleConstruct ||
         node->kind() == torch::jit::prim::ListConstruct;
}

void collect(const Value* value, ReturnPath& path, std::vector<ReturnPath>& computed) {
  const Node* producer = value->node();
  if (is_container(producer)) {
    for (size_t i = 0; i < producer->inputs().size(); ++i) {
      path.push_back(i);
      collect(producer->input(i), path, computed);
      path.pop_back();
    }
  } else if (value->type()->cast<c10::TensorType>() &&
             producer->kind() != torch::jit::prim::Constant &&
             producer->kind() != torch::jit::prim::GetAttr) {
    computed.push_back(path);
  }
}

/// The node whose input `path`'s last index names (the return node or a container), or null
/// where the graph no longer has that shape.
Node* holder_of(torch::jit::Graph& graph, const ReturnPath& path) {
  Node* holder = graph.return_node();
  for (size_t depth = 0; depth < path.size(); ++depth) {
    if (path[depth] >= holder->inputs().size()) return nullptr;
    if (depth + 1 == path.size()) return holder;
    holder = holder->input(path[depth])->node();
    if (!is_container(holder)) return nullptr;
  }
  return nullptr;
}

}  // namespace

std::vector<ReturnPath> computed_returns(const torch::jit::Graph& graph) {
  std::vector<ReturnPath> computed;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    ReturnPath path = {i};
    collect(graph.outputs()[i], path, computed);
  }
  return computed;
}

int clone_folded_returns(torch::jit::Graph& graph, const std::vector<ReturnPath>& computed) {
  int cloned = 0;
  std::unordered_map<Value*, Value*> clones;  // one per constant: `return t, t` returns one tensor
  for (const ReturnPath& path : computed) {
    Node* holder = holder_of(graph, path);
    if (!holder) continue;
    Value* value = holder->input(path.back());
    if (value->node()->kind() != torch::jit::prim::Constant ||
        !value->type()->cast<c10::TensorType>()) {
      continue;
    }
    auto [it, made] = clones.try_emplace(value, nullptr);
    if (made) {
      // Right after the constant, so that it comes before every container that returns it.
      torch::jit::WithInsertPoint at(value->node()->next());
      Value* none = graph.insertConstant(c10::IValue());
      Node* clone = graph.insertNode(graph.create(torch::jit::aten::clone, {value, none}, 1));
      clone->output()->setType(value->type());
      it->second = clone->output();
      ++cloned;
    }
    holder->replaceInput(path.back(), it->second);
  }
  return cloned;
}

}  // namespace kiln
