// What the three fusers share: growing a cluster of nodes that is safe to run as one kernel,
// and contracting a finished cluster into one "kiln::fused" node whose body holds its members.
//
// A cluster must be convex (no path leaves it and comes back: otherwise the fused node would
// depend on itself) and must not straddle a barrier: an op outside the op table may have side
// effects (an in-place update, a print), so no cluster spans across one, and contraction keeps
// every other node in its original order relative to barriers.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

using ir::kFusedOp;

class ClusterGrower {
 public:
  /// Indexes `graph` as it is now; contracting a cluster invalidates the grower.
  explicit ClusterGrower(const ir::Graph& graph);

  void start(ir::Node* seed);
  /// Adds `node` when the cluster stays convex and barrier-free; returns whether it did.
  bool try_add(ir::Node* node);
  bool contains(const ir::Node* node) const { return members_.contains(node); }
  const std::vector<ir::Node*>& members() const { return order_; }

  const std::vector<ir::Node*>& users(const ir::Value* value) const;
  bool is_graph_output(const ir::Value* value) const { return outputs_.contains(value); }
  /// True when every reader of `value` is a member (and the graph does not return it).
  bool used_only_inside(const ir::Value* value) const;
  /// The members' producers and users that are not members, in graph order.
  std::vector<ir::Node*> neighbors() const;

 private:
  bool reaches_member(ir::Node* from, bool forward) const;
  bool barrier_between(int64_t first, int64_t last) const;

  std::unordered_map<const ir::Node*, int64_t> position_;
  std::unordered_map<const ir::Value*, std::vector<ir::Node*>> users_;
  std::unordered_set<const ir::Value*> outputs_;
  std::vector<int64_t> barriers_;  // positions of nodes that may have side effects
  std::unordered_set<const ir::Node*> members_;
  std::vector<ir::Node*> order_;
  int64_t first_ = 0, last_ = 0;
};

/// Replaces `members` (a cluster from ClusterGrower) by one kiln::fused node with `attrs`, whose
/// body holds copies of the members; re-sorts the graph so the new node runs where its first
/// member did, as far as its inputs allow. Returns the new node.
ir::Node* contract_cluster(ir::Graph& graph, const std::vector<ir::Node*>& members,
                           ir::AttrList attrs);

/// Undoes contract_cluster: puts copies of the body's nodes where `fused` was and removes it.
/// A non-empty `reason` goes into each copy's attribute kUnfusedAttr (explain reports it).
void inline_fused_node(ir::Graph& graph, ir::Node* fused, const std::string& reason = {});

/// The attribute that says why a node left its fusion group.
inline constexpr const char* kUnfusedAttr = "kiln_unfused";

/// True when every tensor the node reads and writes is on one CPU or CUDA device: a kernel runs
/// on one device, so an op that mixes devices (a CPU scalar tensor beside CUDA tensors) or
/// runs on meta tensors stays with ATen. Whether the device has a code generator is the
/// pipeline's call (PipelineOptions::fusion), not the fusers'.
bool runs_on_one_device(const ir::Node& node);

/// True for a node the elementwise fusers may take: a lowerable elementwise op on one device.
bool is_fusible_elementwise(const ir::Node& node);

/// True when `shape` broadcasts to `target` (right-aligned; sizes equal or 1).
bool broadcasts_to(const std::vector<int64_t>& shape, const std::vector<int64_t>& target);

/// Grows the cluster through fusible elementwise neighbours whose output has `shape`, and
/// through producers with a shape that broadcasts to it whose every reader is a member (a
/// smaller value cannot be a group output: the kernel writes every element of its iteration
/// space), unless the producer is transcendental and broadcast over many elements (it would be
/// recomputed for each).
void grow_elementwise(ClusterGrower& grower, const std::vector<int64_t>& shape);

/// True for an op that may have side effects: one outside the op table (other than kiln's).
bool is_fusion_barrier(const ir::Node& node);

}  // namespace kiln
