#include "passes/ir/graph.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace kiln::ir {

const Attr* Node::find_attr(const std::string& name) const {
  for (const auto& [key, value] : attrs_) {
    if (key == name) return &value;
  }
  return nullptr;
}

void Node::set_attr(const std::string& name, Attr value) {
  for (auto& [key, existing] : attrs_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  attrs_.emplace_back(name, std::move(value));
}

Value* Graph::new_value(TensorType type, Node* producer) {
  auto value = std::make_unique<Value>();
  value->id_ = static_cast<int>(values_.size());
  value->type_ = std::move(type);
  value->producer_ = producer;
  values_.push_back(std::move(value));
  return values_.back().get();
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> to_copy;
  for (const Value* input : inputs_)
    to_copy[input] = copy->add_input(input->type(), input->name());
  for (const auto& node : nodes_) {
    std::vector<Value*> inputs;
    for (const Value* input : node->inputs())
      inputs.push_back(to_copy.at(input));
    std::vector<TensorType> types;
    for (const Value* output : node->outputs())
      types.push_back(output->type());
    Node* copied = copy->append(node->op(), std::move(inputs), std::move(types), node->attrs());
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      copied->output(i)->set_name(node->output(i)->name());
      to_copy[node->output(i)] = copied->output(i);
    }
    if (node->subgraph()) copied->set_subgraph(node->subgraph()->clone());
  }
  for (const Value* output : outputs_)
    copy->add_output(to_copy.at(output));
  return copy;
}

Value* Graph::add_input(TensorType type, std::string name) {
  Value* value = new_value(std::move(type), nullptr);
  value->name_ = std::move(name);
  inputs_.push_back(value);
  return value;
}

Node* Graph::append(std::string op, std::vector<Value*> inputs,
                    std::vector<TensorType> output_types, AttrList attrs) {
  auto node = std::make_unique<Node>();
  node->op_ = std::move(op);
  node->inputs_ = std::move(inputs);
  node->attrs_ = std::move(attrs);
  for (auto& type : output_types)
    node->outputs_.push_back(new_value(std::move(type), node.get()));
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> nodes;
  nodes.reserve(nodes_.size());
  for (const auto& node : nodes_)
    nodes.push_back(node.get());
  return nodes;
}

void Graph::move_before(const Node* moved, const Node* anchor) {
  place(moved, anchor, /*after=*/false);
}

void Graph::move_after(const Node* moved, const Node* anchor) {
  place(moved, anchor, /*after=*/true);
}

void Graph::place(const Node* moved, const Node* anchor, bool after) {
  Node* mover = nullptr;
  for (const auto& node : nodes_) {
    if (node.get() == moved) mover = node.get();
  }
  std::vector<Node*> order;
  for (const auto& node : nodes_) {
    if (node.get() == moved) continue;
    if (node.get() == anchor && !after) order.push_back(mover);
    order.push_back(node.get());
    if (node.get() == anchor && after) order.push_back(mover);
  }
  set_node_order(order);
}

void Graph::set_node_order(const std::vector<Node*>& order) {
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i)
    position.emplace(order[i], i);
  auto not_a_permutation = [] {
    return std::invalid_argument("set_node_order: not a permutation of the graph's nodes");
  };
  if (position.size() != nodes_.size() || order.size() != nodes_.size()) throw not_a_permutation();
  // Each node straight to its place: one lookup per node (a sort would look up two per compare).
  // Nothing moves until every node is known to have a place, so a bad order changes nothing.
  std::vector<size_t> places;
  places.reserve(nodes_.size());
  for (const auto& node : nodes_) {
    auto it = position.find(node.get());
    if (it == position.end()) throw not_a_permutation();
    places.push_back(it->second);
  }
  std::vector<std::unique_ptr<Node>> placed(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    placed[places[i]] = std::move(nodes_[i]);
  nodes_ = std::move(placed);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& node : nodes_) {
    std::replace(node->inputs_.begin(), node->inputs_.end(), from, to);
  }
  std::replace(outputs_.begin(), outputs_.end(), from, to);
}

std::unordered_map<const Value*, int> count_uses(const Graph& graph) {
  std::unordered_map<const Value*, int> uses;
  for (const auto& node : graph.nodes())
    for (const Value* in : node->inputs())
      ++uses[in];
  for (const Value* out : graph.outputs())
    ++uses[out];
  return uses;
}

}  // namespace kiln::ir
