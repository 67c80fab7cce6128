// Size arithmetic in a TorchScript graph: the nodes that compute a number (or a list of them)
// from the sizes of tensors, such as `B, T, C = x.shape; y.view(B * T, C // 4)`. A traced model
// writes the same through 0-dim tensors (aten::size -> prim::NumToTensor -> aten::floor_divide ->
// aten::Int). A specialization folds them to constants where its signature fixes the sizes; where
// it does not (a size-generic specialization, compiled_module.cpp), they join the regions of the
// ops that take their results (partition.cpp), and a region's import computes them for the sizes
// it is imported at (import_graph.cpp), so the op gets a constant there as it would after folding.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <unordered_map>

namespace kiln {

class SizeNodes {
 public:
  /// A node that reads only the sizes of a tensor no op changes in place (aten::size,
  /// aten::dim, aten::numel) or computes, without side
  /// effects, from the results of such nodes and constants (0-dim tensor constants included):
  /// integer arithmetic, lists and unpacks of them, prim::NumToTensor and ops on its 0-dim
  /// tensors, aten::Int. Everything else (a constant alone, control flow, an op on a tensor's
  /// data) is not.
  bool is_size_node(const torch::jit::Node* node);
  /// An output of a size node.
  bool is_size_value(const torch::jit::Value* value) { return is_size_node(value->node()); }
  /// Forgets what it found (nodes were destroyed, and their addresses may come back).
  void clear() { known_.clear(); }

 private:
  bool decide(const torch::jit::Node* node);
  std::unordered_map<const torch::jit::Node*, bool> known_;
};

}  // namespace kiln
