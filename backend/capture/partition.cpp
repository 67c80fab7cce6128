#include "backend/capture/partition.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "backend/capture/size_nodes.h"
#include "passes/ir/op_table.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Why argument `arg`, given `value`, keeps the node out of a region; nullopt when it is fine. A
// number computed from sizes is fine: the region computes it (size_nodes.h).
std::optional<std::string> argument_problem(const c10::Argument& arg, const Value* value,
                                            SizeNodes& sizes) {
  const auto& type = arg.type();
  if (is_tensor_type(type)) return std::nullopt;
  if (sizes.is_size_value(value)) return std::nullopt;
  if (is_optional_tensor_type(type)) {
    if (is_tensor_type(value->type()) || torch::jit::toIValue(value)) return std::nullopt;
    return "argument '" + arg.name() + "' is an optional tensor that is not known to be None";
  }
  if (is_tensor_list_type(type) || is_optional_tensor_list_type(type)) {
    if (value->node()->kind() != c10::prim::ListConstruct) {
      return "argument '" + arg.name() + "' is a tensor list not built in this graph";
    }
    // `Tensor?[]` ([None, idx] for x[:, idx]): each element a tensor or a None constant.
    for (const Value* element : value->node()->inputs()) {
      const bool none = element->type()->kind() == c10::TypeKind::NoneType;
      if (!is_tensor_type(element->type()) && !none) {
        return "argument '" + arg.name() + "' is a list with an element that may be None";
      }
    }
    // A list that something appends to is not the list its ListConstruct built.
    for (const auto& use : value->uses()) {
      const c10::FunctionSchema* schema = use.user->maybeSchema();
      if (!schema || schema->is_mutable()) {
        return "argument '" + arg.name() + "' is a tensor list that is changed after it is built";
      }
    }
    return std::nullopt;
  }
  auto constant = torch::jit::toIValue(value);
  if (!constant) return "argument '" + arg.name() + "' is not a constant";
  if (!attr_from_ivalue(*constant)) {
    return "argument '" + arg.name() + "' is a constant of type " + value->type()->str() +
           ", which the graph IR cannot hold";
  }
  return std::nullopt;
}

}  // namespace

bool has_data_dependent_shape(const std::string& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::nonzero",  "aten::nonzero_static",    "aten::masked_select",      "aten::unique",
      "aten::_unique",  "aten::_unique2",          "aten::unique_consecutive", "aten::unique_dim",
      "aten::argwhere", "aten::repeat_interleave",
  };
  return ops.contains(name);
}

namespace {

// True when `node`, or a node nested in its blocks, reads one of `values`.
bool reads_any(const Node* node, const std::unordered_set<const Value*>& values) {
  for (const Value* in : node->inputs()) {
    if (values.count(in)) return true;
  }
  for (const torch::jit::Block* block : node->blocks()) {
    for (const Node* inner : block->nodes()) {
      if (reads_any(inner, values)) return true;
    }
    if (reads_any(block->return_node(), values)) return true;
  }
  return false;
}

// True when `node`, or a node nested in its blocks, may change a value in place. (A print, a
// raise or a warning changes none: a region may run before or after them.)
bool writes(const Node* node) {
  if (node->kind() == c10::prim::SetAttr) return true;
  if (const c10::FunctionSchema* schema = node->maybeSchema(); schema && schema->is_mutable())
    return true;
  for (const torch::jit::Block* block : node->blocks()) {
    for (const Node* inner : block->nodes())
      if (writes(inner)) return true;
  }
  return false;
}

// A prim::ListConstruct whose every user (in the same block) can join a region.
bool feeds_only_region_ops(const Node* node) {
  if (node->kind() != c10::prim::ListConstruct) return false;  // one output only from here on
  const c10::TypePtr& type = node->output()->type();
  if (!is_tensor_list_type(type) && !is_optional_tensor_list_type(type)) return false;
  const auto& uses = node->output()->uses();
  return !uses.empty() && std::all_of(uses.begin(), uses.end(), [&](const auto& use) {
    return use.user->owningBlock() == node->owningBlock() && !interpreter_reason(use.user);
  });
}

class RegionBuilder {
 public:
  explicit RegionBuilder(torch::jit::Graph& graph) : graph_(graph) {}

  int partition(torch::jit::Block* block) {
    int regions = 0;
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
      Node* node = *it++;
      for (torch::jit::Block* inner : node->blocks()) {
        regions += RegionBuilder(graph_).partition(inner);  // a block's regions stay in it
      }
      if (node->kind() == c10::prim::Constant) continue;
      if (sizes_.is_size_node(node)) {
        // Size arithmetic stays where it is, or, where it reads the open region's values, moves
        // below it when it closes; the members that take its results compute their own copy.
        if (reads_any(node, defined_) || reads_any(node, derived_)) {
          for (Value* out : node->outputs())
            derived_.insert(out);
          pending_sizes_.push_back(node);
        }
        continue;
      }
      if (!interpreter_reason(node, sizes_)) {
        members_.push_back(node);
        for (Value* out : node->outputs())
          defined_.insert(out);
      } else if (feeds_only_region_ops(node)) {
        // A tensor list for ops like cat: the region rebuilds it inside.
        if (reads_any(node, defined_) || reads_any(node, derived_)) pending_lists_.push_back(node);
      } else if (reads_any(node, defined_) || reads_any(node, derived_) || writes(node)) {
        // The interpreter needs the region's results from here on, or changes a value in place
        // that the region, placed after its last member, would otherwise read changed.
        regions += close(node);
      }
    }
    return regions + close(block->return_node());
  }

 private:
  // Turns the open region into a kiln::Region node placed right after its last member; what
  // reads its results and stays outside moves down to just before `boundary`, the node that
  // ended it (or the block's return).
  int close(Node* boundary) {
    if (members_.empty()) return 0;
    auto subgraph = std::make_shared<torch::jit::Graph>();
    std::unordered_map<Value*, Value*> inner;  // outer value -> subgraph value
    std::vector<Value*> region_inputs;
    auto map_value = [&](Value* outer) -> Value* {
      if (auto found = inner.find(outer); found != inner.end()) return found->second;
      Value* mapped = nullptr;
      if (outer->node()->kind() == c10::prim::Constant) {
        mapped = subgraph->insertNode(subgraph->createClone(outer->node(), nullptr))->output();
      } else {
        mapped = subgraph->addInput()->copyMetadata(outer);
        region_inputs.push_back(outer);
      }
      inner[outer] = mapped;
      return mapped;
    };
    // Size arithmetic a member reads, computed in the region from the sizes of its values.
    std::function<Value*(Value*)> map_size = [&](Value* outer) -> Value* {
      if (auto found = inner.find(outer); found != inner.end()) return found->second;
      Node* producer = outer->node();
      Node* clone = subgraph->insertNode(subgraph->createClone(producer, [&](Value* in) {
        return sizes_.is_size_value(in) ? map_size(in) : map_value(in);
      }));
      for (size_t i = 0; i < producer->outputs().size(); ++i)
        inner[producer->output(i)] = clone->output(i);
      return inner.at(outer);
    };
    for (Node* member : members_) {
      auto map_input = [&](Value* outer) -> Value* {
        if (sizes_.is_size_value(outer)) return map_size(outer);
        // A tensor list built outside: rebuild it inside from its (mapped) elements.
        if (outer->node()->kind() == c10::prim::ListConstruct && !defined_.count(outer) &&
            !inner.count(outer)) {
          Node* list = subgraph->createClone(outer->node(), map_value);
          inner[outer] = subgraph->insertNode(list)->output();
        }
        return map_value(outer);
      };
      Node* clone = subgraph->insertNode(subgraph->createClone(member, map_input));
      for (size_t i = 0; i < member->outputs().size(); ++i)
        inner[member->output(i)] = clone->output(i);
    }

    // Lists built outside whose every user is a member go away with the members.
    std::unordered_set<const Node*> absorbed;
    for (Node* member : members_) {
      for (Value* in : member->inputs()) {
        Node* producer = in->node();
        if (producer->kind() != c10::prim::ListConstruct || defined_.count(in)) continue;
        const auto& uses = in->uses();
        if (std::all_of(uses.begin(), uses.end(),
                        [&](const auto& use) { return is_member(use.user); }))
          absorbed.insert(producer);
      }
    }

    // Size arithmetic on the region's values that only its members read goes away with them.
    std::unordered_set<const Node*> dead_sizes;
    for (auto it = pending_sizes_.rbegin(); it != pending_sizes_.rend(); ++it) {
      const bool dead =
          std::all_of((*it)->outputs().begin(), (*it)->outputs().end(), [&](const Value* out) {
            return std::all_of(out->uses().begin(), out->uses().end(), [&](const auto& use) {
              return is_member(use.user) || dead_sizes.count(use.user);
            });
          });
      if (dead) dead_sizes.insert(*it);
    }
    absorbed.insert(dead_sizes.begin(), dead_sizes.end());

    Node* region = graph_.create(region_symbol(), region_inputs, 0);
    region->g_(c10::attr::Subgraph, subgraph);
    region->insertAfter(members_.back());
    for (Node* member : members_) {
      for (Value* out : member->outputs()) {
        const bool used_outside = std::any_of(
            out->uses().begin(), out->uses().end(),
            [&](const auto& use) { return !is_member(use.user) && !absorbed.count(use.user); });
        if (!used_outside) continue;
        subgraph->registerOutput(inner.at(out));
        out->replaceAllUsesWith(region->addOutput()->copyMetadata(out));
      }
    }
    // Cut every edge among the nodes that go away before destroying any of them.
    for (Node* member : members_)
      member->removeAllInputs();
    for (const Node* list : absorbed)
      const_cast<Node*>(list)->removeAllInputs();
    for (auto it = members_.rbegin(); it != members_.rend(); ++it)
      (*it)->destroy();
    // Size arithmetic and lists that read the region's results and still have users outside
    // move below it, in their order, to just before the boundary: after every node between the
    // region and the boundary, some of which they may read (sizes first: a list may hold a
    // size's 0-dim tensor, never the reverse).
    for (Node* size : pending_sizes_) {
      if (!absorbed.count(size)) size->moveBefore(boundary);
    }
    for (Node* list : pending_lists_) {
      if (!absorbed.count(list)) list->moveBefore(boundary);
    }
    for (const Node* list : absorbed)
      const_cast<Node*>(list)->destroy();
    pending_lists_.clear();
    pending_sizes_.clear();
    members_.clear();
    defined_.clear();
    derived_.clear();
    sizes_.clear();  // nodes were destroyed, and a new one may take the address of one
    return 1;
  }

  bool is_member(const Node* node) const {
    return std::find(members_.begin(), members_.end(), node) != members_.end();
  }

  torch::jit::Graph& graph_;
  std::vector<Node*> members_;
  std::vector<Node*> pending_lists_;
  std::vector<Node*> pending_sizes_;  // size arithmetic reading the open region's values
  std::unordered_set<const Value*> defined_;
  std::unordered_set<const Value*> derived_;  // the results of pending_sizes_
  SizeNodes sizes_;
};

}  // namespace

c10::Symbol region_symbol() {
  static const c10::Symbol symbol = c10::Symbol::fromQualString("kiln::Region");
  return symbol;
}

std::optional<std::string> schema_problem(const c10::FunctionSchema& schema) {
  if (schema.is_mutable()) return "mutates one of its inputs";
  for (const c10::Argument& r : schema.returns()) {
    if (!is_tensor_type(r.type())) return "returns a " + r.type()->str() + ", not a tensor";
  }
  if (!c10::Dispatcher::singleton().findSchema({schema.name(), schema.overload_name()})) {
    return "a TorchScript-only operator (not in ATen's dispatcher)";
  }
  if (has_data_dependent_shape(schema.name())) {
    // Left out of regions, so the code after it compiles for each shape it produces.
    return "its output shape depends on the values of its input";
  }
  const bool returns_alias = std::any_of(schema.returns().begin(), schema.returns().end(),
                                         [](const c10::Argument& r) { return r.alias_info(); });
  const ir::OpInfo* info = ir::find_op(qualified_op_name(schema));
  if (returns_alias && (!info || info->kind != ir::OpKind::View)) {
    return "returns a view of its input, and this view op is not in kiln's op table";
  }
  return std::nullopt;
}

// True when `value` is a tensor in oneDNN's opaque layout: made by the weight-prepacking step of
// capture (to_mkldnn, oneDNN convolutions and constants) or computed from one, up to a to_dense.
// Such tensors have no strides and no meta form, so ops on them stay in the interpreter.
// `seen` memoizes within one question: residual and squeeze-excitation blocks give a value many
// paths to the graph's inputs, and walking each path again made the walk exponential
// (EfficientNet-B0: 43 s to specialize, RegNetY-400MF: 457 s).
bool is_onednn(const Value* value, std::unordered_map<const Value*, bool>& seen) {
  if (auto found = seen.find(value); found != seen.end()) return found->second;
  static const c10::Symbol to_dense = c10::Symbol::fromQualString("aten::to_dense");
  static const c10::Symbol to_mkldnn = c10::Symbol::fromQualString("aten::to_mkldnn");
  const Node* node = value->node();
  const c10::Symbol kind = node->kind();
  bool onednn = false;
  if (kind == to_dense || kind == c10::prim::Param || !node->blocks().empty()) {
    onednn = false;
  } else if (kind == to_mkldnn ||
             std::string_view(kind.toQualString()).starts_with("prim::mkldnn") ||
             kind == c10::prim::ConstantMKLDNNTensor || kind == c10::prim::BroadcastMKLDNNTensors) {
    onednn = true;
  } else {
    onednn = std::any_of(node->inputs().begin(), node->inputs().end(), [&](const Value* in) {
      return in->type()->kind() == c10::TypeKind::TensorType && is_onednn(in, seen);
    });
  }
  seen[value] = onednn;
  return onednn;
}

bool is_onednn(const Value* value) {
  std::unordered_map<const Value*, bool> seen;
  return is_onednn(value, seen);
}

bool is_split_op(const Node* node) {
  static const std::unordered_set<std::string> splits = {"aten::split.Tensor", "aten::split.sizes",
                                                         "aten::split_with_sizes", "aten::chunk",
                                                         "aten::unbind.int"};
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || !splits.contains(qualified_op_name(*schema))) return false;
  if (node->outputs().size() != 1 || node->output()->uses().size() != 1) return false;
  // Right next to it, so no region can close between the list and its pieces.
  if (node->next()->kind() != c10::prim::ListUnpack || node->next()->input() != node->output()) {
    return false;
  }
  return std::all_of(node->inputs().begin() + 1, node->inputs().end(),
                     [](const Value* in) { return torch::jit::toIValue(in).has_value(); });
}

std::optional<std::string> interpreter_reason(const Node* node) {
  SizeNodes sizes;
  return interpreter_reason(node, sizes);
}

std::optional<std::string> interpreter_reason(const Node* node, SizeNodes& sizes) {
  if (!node->blocks().empty()) return "control flow";
  const std::string kind = node->kind().toQualString();
  if (kind == "aten::to_mkldnn" || kind == "aten::to_dense") {
    return "converts to or from oneDNN's layout (weight prepacking)";
  }
  for (const Value* in : node->inputs()) {
    if (in->type()->kind() == c10::TypeKind::TensorType && is_onednn(in)) {
      return "works on a tensor in oneDNN's layout (weight prepacking)";
    }
  }
  if (is_split_op(node) || node->kind() == c10::prim::ConstantChunk) return std::nullopt;
  if (node->kind() == c10::prim::ListUnpack && is_split_op(node->input()->node())) {
    return std::nullopt;
  }
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return std::string(node->kind().toQualString()) + " is a TorchScript-only construct";
  for (const Value* out : node->outputs()) {
    if (!is_tensor_type(out->type())) return "returns a " + out->type()->str() + ", not a tensor";
  }
  if (auto problem = schema_problem(*schema)) return problem;
  const auto& args = schema->arguments();
  if (args.size() != node->inputs().size()) return "has a variable number of arguments";
  for (size_t i = 0; i < args.size(); ++i) {
    if (auto problem = argument_problem(args[i], node->input(i), sizes)) return problem;
  }
  return std::nullopt;
}

namespace {

// Size arithmetic whose every reader joined a region (which computes its own copy) is dead.
void remove_dead_sizes(torch::jit::Block* block) {
  SizeNodes sizes;
  std::vector<Node*> nodes(block->nodes().begin(), block->nodes().end());
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    for (torch::jit::Block* inner : (*it)->blocks())
      remove_dead_sizes(inner);
    const bool unused = std::none_of((*it)->outputs().begin(), (*it)->outputs().end(),
                                     [](const Value* out) { return out->hasUses(); });
    if (unused && sizes.is_size_node(*it)) (*it)->destroy();
  }
}

}  // namespace

int partition_into_regions(torch::jit::Graph& graph) {
  RegionBuilder builder(graph);
  const int regions = builder.partition(graph.block());
  remove_dead_sizes(graph.block());
  return regions;
}

}  // namespace kiln
