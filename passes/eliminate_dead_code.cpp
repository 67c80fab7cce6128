#include "passes/eliminate_dead_code.h"

#include <unordered_set>

namespace kiln {

int eliminate_dead_code(ir::Graph& graph) {
  // Walking backwards, every reader of a value is seen before its producer, so one pass finds
  // whole dead chains: a node is live iff something live (or the graph's return) reads it.
  std::unordered_set<const ir::Value*> used(graph.outputs().begin(), graph.outputs().end());
  std::unordered_set<const ir::Node*> dead;
  std::vector<ir::Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node* node = *it;
    bool live = false;
    for (const ir::Value* output : node->outputs())
      live = live || used.contains(output);
    if (live) {
      used.insert(node->inputs().begin(), node->inputs().end());
    } else {
      dead.insert(node);
    }
  }
  graph.remove_nodes_if([&](const ir::Node& node) { return dead.contains(&node); });
  return static_cast<int>(dead.size());
}

}  // namespace kiln
