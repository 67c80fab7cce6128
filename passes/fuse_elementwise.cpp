#include "passes/fuse_elementwise.h"

#include "passes/fusion_clusters.h"

namespace kiln {

int fuse_elementwise(ir::Graph& graph) {
  int groups = 0;
  while (true) {
    std::vector<ir::Node*> nodes = graph.nodes();
    ir::Node* seed = nullptr;
    for (auto it = nodes.rbegin(); it != nodes.rend() && !seed; ++it) {
      if (is_fusible_elementwise(**it)) seed = *it;
    }
    if (!seed) return groups;
    ClusterGrower grower(graph);
    grower.start(seed);
    grow_elementwise(grower, seed->output()->type().sizes);
    contract_cluster(graph, grower.members(), {});
    ++groups;
  }
}

}  // namespace kiln
