#include "backend/capture/snapshot_lists.h"

#include <vector>

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool is_append(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema && schema->name() == "aten::append" && node->outputs().size() == 1 &&
         !node->output()->hasUses();
}

// A use that reads what the list holds at that point and keeps nothing that could see a later
// append.
bool is_plain_read(const Node* node) {
  if (node->kind() == c10::prim::ListUnpack) return true;
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || schema->is_mutable() || !node->blocks().empty()) return false;
  for (const Value* out : node->outputs()) {
    if (out->type()->kind() == c10::TypeKind::ListType) return false;
  }
  return true;
}

/// Whether every use of `list` is in the top-level block and an append or a plain read, with at
/// least one append.
bool can_snapshot(const torch::jit::Graph& graph, const Value* list) {
  bool appended = false;
  for (const torch::jit::Use& use : list->uses()) {
    if (use.user->owningBlock() != graph.block()) return false;
    if (use.user->kind() == c10::prim::Return) return false;
    if (is_append(use.user) && use.offset == 0) {
      appended = true;
    } else if (!is_plain_read(use.user)) {
      return false;
    }
  }
  return appended;
}

void snapshot(torch::jit::Graph& graph, Node* construct) {
  Value* list = construct->output();
  const c10::TypePtr element_type = list->type()->expectRef<c10::ListType>().getElementType();
  std::vector<Value*> elements(construct->inputs().begin(), construct->inputs().end());
  std::vector<Node*> appends;
  for (Node* node = construct->next(); node != graph.return_node(); node = node->next()) {
    bool uses_list = false;
    for (const Value* input : node->inputs())
      uses_list |= input == list;
    if (!uses_list) continue;
    if (is_append(node)) {
      elements.push_back(node->input(1));
      appends.push_back(node);
      continue;
    }
    torch::jit::WithInsertPoint at(node);
    Value* now = graph.insertNode(graph.createList(element_type, elements))->output();
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      if (node->input(i) == list) node->replaceInput(i, now);
    }
  }
  for (Node* append : appends)
    append->destroy();
  if (!list->hasUses()) construct->destroy();
}

}  // namespace

int snapshot_lists(torch::jit::Graph& graph) {
  std::vector<Node*> lists;
  for (Node* node : graph.block()->nodes()) {
    if (node->kind() == c10::prim::ListConstruct && can_snapshot(graph, node->output())) {
      lists.push_back(node);
    }
  }
  for (Node* construct : lists)
    snapshot(graph, construct);
  return static_cast<int>(lists.size());
}

}  // namespace kiln
