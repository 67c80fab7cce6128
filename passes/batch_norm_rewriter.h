// What fold_batch_norm and decompose_batch_norm share: reading an aten::batch_norm node, and
// rewriting each eval-mode one as ops appended to the graph.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/node_rewriter.h"

namespace kiln {

inline bool is_constant(const ir::Value* v) {
  return v->producer() && v->producer()->op() == ir::kConstantOp;
}

/// True when the node's bool attribute `name` is present and false (batch_norm's `training`).
inline bool is_false_attr(const ir::Node& node, const char* name) {
  const auto* b = std::get_if<bool>(node.find_attr(name));
  return b && !*b;
}

/// The batch norm's optional tensor arguments by name: present ones are inputs after the first,
/// in schema order (weight, bias, running_mean, running_var); absent ones are None attributes.
inline std::unordered_map<std::string, ir::Value*> batch_norm_arguments(const ir::Node& bn) {
  std::unordered_map<std::string, ir::Value*> args;
  size_t next = 1;
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    if (!bn.find_attr(name) && next < bn.inputs().size()) args[name] = bn.input(next++);
  }
  return args;
}

/// A NodeRewriter of eval-mode batch norms.
class BatchNormRewriter : public NodeRewriter {
 public:
  using NodeRewriter::NodeRewriter;

 protected:
  bool applies(const ir::Node& node) const override {
    return node.op() == "aten::batch_norm" && is_false_attr(node, "training");
  }

  /// gamma * rsqrt(var + eps) (rsqrt(var + eps) without gamma), the per-channel scale, typed
  /// `vec`.
  ir::Value* per_channel_scale(std::unordered_map<std::string, ir::Value*>& args, double eps,
                               const ir::TensorType& vec) {
    ir::Value* s = add("aten::rsqrt",
                       {add("aten::add.Scalar", {args["running_var"]}, vec,
                            {{"other", eps}, {"alpha", int64_t{1}}})},
                       vec);
    if (args.count("weight")) s = add("aten::mul.Tensor", {s, args["weight"]}, vec);
    return s;
  }
};

}  // namespace kiln
