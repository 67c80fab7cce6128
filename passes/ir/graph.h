// The graph IR: an SSA dataflow graph of tensor operations with static types.
//
// A Graph owns its Values and Nodes. Nodes are kept in execution order. A Node names its
// operator the way ATen does, with the overload ("aten::add.Tensor", "aten::relu"); its tensor
// operands are Values and its other arguments are attributes named by the schema's argument
// names. Two conventions cover what a plain list cannot:
//   - an optional tensor argument that is absent is the attribute `name=None`;
//   - a Tensor[] argument takes as many consecutive inputs as its attribute `name=<count>` says.
// Frozen weights are "prim::Constant" nodes with attribute `index`: the position of the tensor
// in the list of constants that travels beside the graph (the IR holds no tensor data).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/ir/attr.h"
#include "passes/ir/types.h"

namespace kiln::ir {

/// The op of a frozen weight (attribute `index`, see above).
inline constexpr const char* kConstantOp = "prim::Constant";
/// The op of a fusion group: a node whose subgraph is the group's body (fusion_clusters.h).
inline constexpr const char* kFusedOp = "kiln::fused";

class Node;
class Graph;

class Value {
 public:
  int id() const { return id_; }
  const TensorType& type() const { return type_; }
  void set_type(TensorType type) { type_ = std::move(type); }
  /// The node that defines this value; null for a graph input.
  Node* producer() const { return producer_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

 private:
  friend class Graph;
  int id_ = 0;
  TensorType type_;
  Node* producer_ = nullptr;
  std::string name_;  // a debug name from the source, may be empty
};

class Node {
 public:
  const std::string& op() const { return op_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return inputs_.at(i); }
  Value* output(size_t i = 0) const { return outputs_.at(i); }
  const AttrList& attrs() const { return attrs_; }

  /// The attribute with this name, or null.
  const Attr* find_attr(const std::string& name) const;
  void set_attr(const std::string& name, Attr value);
  void replace_input(size_t i, Value* value) { inputs_.at(i) = value; }
  /// The body of a node that stands for a group of nodes (a fusion group); null otherwise. Its
  /// inputs and outputs correspond one to one to the node's.
  const Graph* subgraph() const { return subgraph_.get(); }
  void set_subgraph(std::shared_ptr<Graph> body) { subgraph_ = std::move(body); }

 private:
  friend class Graph;
  std::string op_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  AttrList attrs_;
  std::shared_ptr<Graph> subgraph_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// A deep copy: the same inputs, nodes (subgraphs copied too), attributes, types, names and
  /// outputs, in the same order; value ids are renumbered densely.
  std::unique_ptr<Graph> clone() const;

  Value* add_input(TensorType type, std::string name = {});
  /// Appends a node at the end of the node list, with one new output Value per type.
  Node* append(std::string op, std::vector<Value*> inputs, std::vector<TensorType> output_types,
               AttrList attrs = {});
  void add_output(Value* value) { outputs_.push_back(value); }
  void set_outputs(std::vector<Value*> outputs) { outputs_ = std::move(outputs); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Nodes in execution order.
  std::vector<Node*> nodes() const;
  size_t num_nodes() const { return nodes_.size(); }
  /// Number of Values ever created; ids are in [0, num_values()).
  int num_values() const { return static_cast<int>(values_.size()); }

  /// Every use of `from` (node inputs and graph outputs) now reads `to`.
  void replace_all_uses(Value* from, Value* to);
  /// Puts the nodes in this order; `order` must hold every node exactly once.
  void set_node_order(const std::vector<Node*>& order);
  /// Moves `moved` to just before `anchor` (passes append new nodes, then put them in place).
  void move_before(const Node* moved, const Node* anchor);
  /// Moves `moved` to just after `anchor`.
  void move_after(const Node* moved, const Node* anchor);
  /// Removes the nodes for which remove(node) is true; their outputs must be unused.
  template <typename Pred>
  void remove_nodes_if(Pred remove) {
    std::erase_if(nodes_, [&](const std::unique_ptr<Node>& n) { return remove(*n); });
  }

 private:
  Value* new_value(TensorType type, Node* producer);
  void place(const Node* moved, const Node* anchor, bool after);

  std::vector<std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
};

/// How many times each value is read: once per node input slot, once per graph output.
std::unordered_map<const Value*, int> count_uses(const Graph& graph);

}  // namespace kiln::ir
