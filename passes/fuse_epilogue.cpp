#include "passes/fuse_epilogue.h"

#include "passes/fusion_clusters.h"
#include "passes/ir/op_table.h"

namespace kiln {
namespace {

bool is_gemm_or_conv(const ir::Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  return info && (info->kind == ir::OpKind::Gemm || info->kind == ir::OpKind::Convolution);
}

}  // namespace

int fuse_epilogue(ir::Graph& graph) {
  int groups = 0;
  while (true) {
    ClusterGrower grower(graph);
    ir::Node* producer = nullptr;
    ir::Node* seed = nullptr;
    for (ir::Node* node : graph.nodes()) {
      if (!is_gemm_or_conv(*node) || node->outputs().size() != 1) continue;
      for (ir::Node* user : grower.users(node->output())) {
        if (is_fusible_elementwise(*user) &&
            user->output()->type().sizes == node->output()->type().sizes) {
          seed = user;
          break;
        }
      }
      if (seed) {
        producer = node;
        break;
      }
    }
    if (!seed) return groups;
    grower.start(seed);
    grow_elementwise(grower, seed->output()->type().sizes);
    contract_cluster(graph, grower.members(), {{"epilogue", producer->op()}});
    ++groups;
  }
}

}  // namespace kiln
