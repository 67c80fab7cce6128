// What fold_batch_norm and decompose_batch_norm both read off an aten::batch_norm node.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

inline bool is_constant(const ir::Value* v) {
  return v->producer() && v->producer()->op() == "prim::Constant";
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

/// `like` with these sizes, contiguous.
inline ir::TensorType with_sizes(const ir::TensorType& like, std::vector<int64_t> sizes) {
  ir::TensorType t = like;
  t.sizes = std::move(sizes);
  t.strides = ir::contiguous_strides(t.sizes);
  return t;
}

}  // namespace kiln
