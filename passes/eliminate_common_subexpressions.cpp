#include "passes/eliminate_common_subexpressions.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "passes/ir/op_table.h"

namespace kiln {
namespace {

// Everything that makes two nodes compute the same values, as text: op, input ids, attributes.
std::string signature(const ir::Node& node) {
  std::string key = node.op() + "(";
  for (const ir::Value* in : node.inputs())
    key += std::to_string(in->id()) + ",";
  key += "){";
  for (const auto& [name, value] : node.attrs())
    key += name + "=" + ir::attr_string(value) + ",";
  key += "}";
  for (const ir::Value* out : node.outputs())
    key += ir::type_string(out->type()) + ";";
  return key;
}

bool can_merge(const ir::Node& node) {
  return node.subgraph() == nullptr && ir::find_op(node.op()) != nullptr;
}

}  // namespace

int eliminate_common_subexpressions(ir::Graph& graph) {
  // A graph output stays its own tensor: the caller may change one output in place and must not
  // see another change with it.
  const std::unordered_set<const ir::Value*> returned(graph.outputs().begin(),
                                                      graph.outputs().end());
  std::unordered_map<std::string, ir::Node*> first;
  std::unordered_set<const ir::Node*> merged;
  for (ir::Node* node : graph.nodes()) {
    if (!can_merge(*node)) continue;
    const bool is_returned = std::any_of(node->outputs().begin(), node->outputs().end(),
                                         [&](const ir::Value* v) { return returned.contains(v); });
    auto [found, inserted] = first.emplace(signature(*node), node);
    if (inserted || is_returned) continue;
    for (size_t i = 0; i < node->outputs().size(); ++i)
      graph.replace_all_uses(node->output(i), found->second->output(i));
    merged.insert(node);
  }
  graph.remove_nodes_if([&](const ir::Node& node) { return merged.contains(&node); });
  return static_cast<int>(merged.size());
}

}  // namespace kiln
