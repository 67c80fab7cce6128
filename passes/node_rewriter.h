// Rewriting chosen nodes of a graph as ops appended to it, put in their place (the norm
// decompositions and batch-norm folding).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "passes/assign_layout.h"  // kContiguousFormat
#include "passes/ir/graph.h"

namespace kiln {

/// `like` with these sizes, contiguous.
inline ir::TensorType with_sizes(const ir::TensorType& like, std::vector<int64_t> sizes) {
  ir::TensorType t = like;
  t.sizes = std::move(sizes);
  t.strides = ir::contiguous_strides(t.sizes);
  return t;
}

/// Whether `attr` is present and None (an optional argument left out).
inline bool is_none(const ir::Attr* attr) {
  return attr && std::holds_alternative<ir::NoneAttr>(*attr);
}

/// A number attribute (int or float) as a double, or nullopt when the node has none (or another
/// kind).
inline std::optional<double> number_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  if (!attr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(attr)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(attr)) return *d;
  return std::nullopt;
}

/// The list-of-ints attribute `name`, or null when the node has none (or another kind).
inline const std::vector<int64_t>* int_list_attr(const ir::Node& node, const char* name) {
  return std::get_if<std::vector<int64_t>>(node.find_attr(name));
}

/// A plain convolution: conv2d, conv3d, mkldnn_convolution (assign_layout's), or convolution
/// (tracing's _convolution) not transposed and without output padding. Its rank is the caller's
/// to check.
inline bool is_forward_conv(const ir::Node& node) {
  const std::string& op = node.op();
  if (op == "aten::conv2d" || op == "aten::conv3d" || op == "aten::mkldnn_convolution") return true;
  if (op != "aten::convolution" && op != "aten::_convolution") return false;
  const auto* transposed = std::get_if<bool>(node.find_attr("transposed"));
  const auto* output_padding = int_list_attr(node, "output_padding");
  if (!transposed || *transposed || !output_padding) return false;
  return std::all_of(output_padding->begin(), output_padding->end(),
                     [](int64_t p) { return p == 0; });
}

// c10::ScalarType's code for bfloat16, as aten::_to_copy's dtype reads it.
inline constexpr int64_t kBFloat16ScalarType = 15;

/// Appends `aten::_to_copy(value, dtype=bfloat16)` (at the graph's end: the caller moves it) and
/// returns it; its output is `value`'s type in bf16 (dense row-major where `dense`), named after
/// it where `value` has a name.
inline ir::Node* append_bf16_copy(ir::Graph& graph, ir::Value* value, bool dense = false) {
  ir::TensorType type = value->type();
  type.dtype = ir::DType::BFloat16;
  if (dense) type.strides = ir::contiguous_strides(type.sizes);
  const ir::Attr format = dense ? ir::Attr(kContiguousFormat) : ir::Attr(ir::NoneAttr{});
  ir::Node* cast = graph.append("aten::_to_copy", {value}, {type},
                                {{"dtype", kBFloat16ScalarType},
                                 {"layout", ir::NoneAttr{}},
                                 {"device", ir::NoneAttr{}},
                                 {"pin_memory", ir::NoneAttr{}},
                                 {"non_blocking", false},
                                 {"memory_format", format}});
  if (!value->name().empty()) cast->output()->set_name(value->name() + "_bf16");
  return cast;
}

/// The nodes that read each value, once per input slot, with a null one per graph output.
inline std::unordered_map<const ir::Value*, std::vector<ir::Node*>> readers_of(ir::Graph& graph) {
  std::unordered_map<const ir::Value*, std::vector<ir::Node*>> readers;
  for (ir::Node* node : graph.nodes())
    for (const ir::Value* in : node->inputs())
      readers[in].push_back(node);
  for (const ir::Value* out : graph.outputs())
    readers[out].push_back(nullptr);
  return readers;
}

/// Walks a graph's nodes in order; a subclass's rewrite() of one it applies to appends the new
/// ops with add() and marks what they replace in removed_, which run() then takes out of the
/// graph.
class NodeRewriter {
 public:
  explicit NodeRewriter(ir::Graph& graph) : graph_(graph) {}
  virtual ~NodeRewriter() = default;

  /// Returns the number of nodes rewritten.
  int run() {
    int rewritten = 0;
    for (ir::Node* node : graph_.nodes()) {
      if (applies(*node) && rewrite(*node)) ++rewritten;
    }
    graph_.remove_nodes_if([&](const ir::Node& n) { return removed_.contains(&n); });
    return rewritten;
  }

 protected:
  virtual bool applies(const ir::Node& node) const = 0;
  /// False leaves the node as it was (and must add nothing).
  virtual bool rewrite(ir::Node& node) = 0;

  ir::Value* add(const std::string& op, std::vector<ir::Value*> inputs, const ir::TensorType& type,
                 ir::AttrList attrs = {}) {
    ir::Node* node = graph_.append(op, std::move(inputs), {type}, std::move(attrs));
    added_.push_back(node);
    return node->output();
  }

  /// Puts the ops added since the last call where `node` is, and `value` (one of them) in place
  /// of its only output.
  void replace_with_added(ir::Node& node, ir::Value* value) {
    value->set_name(node.output()->name());
    for (ir::Node* added : added_)
      graph_.move_before(added, &node);
    added_.clear();
    graph_.replace_all_uses(node.output(), value);
    removed_.insert(&node);
  }

  ir::Graph& graph_;
  std::vector<ir::Node*> added_;  // appended for the node being rewritten
  std::unordered_set<const ir::Node*> removed_;
};

}  // namespace kiln
