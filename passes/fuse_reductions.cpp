#include "passes/fuse_reductions.h"

#include <algorithm>
#include <unordered_set>

#include "passes/fusion_clusters.h"
#include "passes/ir/op_table.h"
#include "passes/kernel/lower_ops.h"

namespace kiln {
namespace {

bool is_fusible_reduction(const ir::Node& node) {
  if (node.op() == kFusedOp || !kernel::can_lower(node) || !kernel::reduced_dims(node))
    return false;
  return runs_on_one_device(node);
}

class ReductionGroup {
 public:
  ReductionGroup(ClusterGrower& grower, ir::Node* reduction)
      : grower_(grower),
        input_shape_(reduction->input(0)->type().sizes),
        output_shape_(reduction->output()->type().sizes),
        keepdim_(kernel::keeps_reduced_dims(*reduction)),
        contraction_(kernel::is_contraction(*reduction)),
        plain_(is_plain_reduction(*reduction)),
        reduced_dims_(*kernel::reduced_dims(*reduction)) {
    grower_.start(reduction);
    // A contraction's element space is [..., N, K], the shape of no value: no producer fits it.
    if (contraction_) input_shape_.insert(input_shape_.end() - 1, output_shape_.back());
    if (output_shape_ != input_shape_) row_values_.insert(reduction->output());
  }

  void grow() {
    bool grew = true;
    while (grew) {
      grew = false;
      for (ir::Node* node : candidates()) {
        if (const ViewRole view = view_role(*node); view != ViewRole::None) {
          if (!grower_.try_add(node)) continue;
          if (view == ViewRole::Partial) row_values_.insert(node->output());
          grew = true;
          continue;
        }
        if (is_sibling(*node)) {
          if (!grower_.try_add(node)) continue;
          if (output_shape_ != input_shape_) row_values_.insert(node->output());
          grew = true;
          continue;
        }
        if (!is_fusible_elementwise(*node)) continue;
        const Role role = role_of(*node);
        if (role == Role::None || !grower_.try_add(node)) continue;
        if (role == Role::RowConsumer) {
          row_consumers_.insert(node);
          row_values_.insert(node->output());
        }
        grew = true;
      }
    }
  }

 private:
  enum class Role { None, Producer, ElementConsumer, RowConsumer };

  /// A view of a reduced value that only inserts size-1 dims (batch norm's backward unsqueezes
  /// its per-channel sums to [1, C, 1, 1] to scale the gradient): Kept when the result lines up
  /// with the input as a keepdim reduction's would, so whole-row consumers may read it;
  /// Partial on the way there (unsqueeze by unsqueeze), for further views only. The kernel reads
  /// the reduced value itself; no view joins a group as its output to the graph.
  enum class ViewRole { None, Partial, Kept };

  ViewRole view_role(const ir::Node& node) const {
    if (!plain_ || keepdim_ || !kernel::is_reshaping_view(node.op()) ||
        !row_values_.contains(node.input(0)) || grower_.is_graph_output(node.output()))
      return ViewRole::None;
    auto non_unit = [](const std::vector<int64_t>& sizes) {
      std::vector<int64_t> kept;
      for (int64_t s : sizes)
        if (s != 1) kept.push_back(s);
      return kept;
    };
    const auto& sizes = node.output()->type().sizes;
    if (non_unit(sizes) != non_unit(output_shape_)) return ViewRole::None;
    // Right-aligned against the input, every dim of size > 1 must fall on a kept dim.
    const int offset = static_cast<int>(input_shape_.size()) - static_cast<int>(sizes.size());
    if (offset < 0) return ViewRole::None;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int d = offset + static_cast<int>(i);
      const bool reduced =
          std::find(reduced_dims_.begin(), reduced_dims_.end(), d) != reduced_dims_.end();
      if (sizes[i] != 1 && (reduced || sizes[i] != input_shape_[d])) return ViewRole::Partial;
    }
    return ViewRole::Kept;
  }

  static bool is_plain_reduction(const ir::Node& node) {
    const ir::OpInfo* info = ir::find_op(node.op());
    return info && info->kind == ir::OpKind::Reduction && !kernel::is_contraction(node);
  }

  /// The members' neighbours, and the sibling reductions among the other readers of values the
  /// group reads from outside (var and mean of one tensor, its amin and amax).
  std::vector<ir::Node*> candidates() const {
    std::vector<ir::Node*> found = grower_.neighbors();
    if (!plain_) return found;
    for (const ir::Node* member : grower_.members()) {
      for (const ir::Value* v : member->inputs()) {
        if (is_member_value(v)) continue;
        for (ir::Node* user : grower_.users(v))
          if (!grower_.contains(user) && is_sibling(*user) &&
              std::find(found.begin(), found.end(), user) == found.end())
            found.push_back(user);
      }
    }
    return found;
  }

  /// A second reduction joins when it reduces a value of the seed's input shape over the same
  /// dims, keeping or dropping them alike, from per-element values: the kernel then reads what
  /// they share once (batch norm's backward sums its gradient and the gradient times x - mean;
  /// var and mean; amin and amax). Normalizations and contractions stay alone.
  bool is_sibling(const ir::Node& node) const {
    if (!plain_ || !is_plain_reduction(node) || !is_fusible_reduction(node)) return false;
    if (node.input(0)->type().sizes != input_shape_ ||
        kernel::keeps_reduced_dims(node) != keepdim_ || kernel::reduced_dims(node) != reduced_dims_)
      return false;
    return !reads_row_value(node);
  }

  bool reads_row_value(const ir::Node& node) const {
    return std::any_of(node.inputs().begin(), node.inputs().end(),
                       [&](const ir::Value* v) { return row_values_.contains(v); });
  }

  bool is_member_value(const ir::Value* v) const {
    return v->producer() && grower_.contains(v->producer());
  }

  Role role_of(const ir::Node& node) const {
    const auto& sizes = node.output()->type().sizes;
    bool feeds_member = false, feeds_row_consumer = false;
    for (const ir::Node* user : grower_.users(node.output())) {
      feeds_member = feeds_member || grower_.contains(user);
      feeds_row_consumer = feeds_row_consumer || row_consumers_.contains(user);
    }
    if (feeds_member) {
      // Producers are computed per element of the reduction's input.
      if (feeds_row_consumer || contraction_) return Role::None;
      const bool fits = sizes == input_shape_ || (broadcasts_to(sizes, input_shape_) &&
                                                  grower_.used_only_inside(node.output()));
      return fits ? Role::Producer : Role::None;
    }
    if (reads_row_value(node) && sizes == output_shape_) {
      // On the reduced values: every member operand must be one of them.
      for (const ir::Value* v : node.inputs()) {
        if (is_member_value(v) && !row_values_.contains(v)) return Role::None;
      }
      return Role::RowConsumer;
    }
    // On whole rows. A reduced value that dropped its dimensions would broadcast against the
    // wrong axes, so only kept dimensions may meet whole rows.
    if (sizes != input_shape_) return Role::None;
    return reads_row_value(node) && !keepdim_ ? Role::None : Role::ElementConsumer;
  }

  ClusterGrower& grower_;
  std::vector<int64_t> input_shape_, output_shape_;
  bool keepdim_;
  bool contraction_;
  bool plain_;  // the seed is a reduction (not a normalization or a contraction)
  std::vector<int> reduced_dims_;
  std::unordered_set<const ir::Value*> row_values_;
  std::unordered_set<const ir::Node*> row_consumers_;
};

}  // namespace

int fuse_reductions(ir::Graph& graph) {
  int groups = 0;
  while (true) {
    ir::Node* seed = nullptr;
    for (ir::Node* node : graph.nodes()) {
      if (is_fusible_reduction(*node)) {
        seed = node;
        break;
      }
    }
    if (!seed) return groups;
    ClusterGrower grower(graph);
    ReductionGroup group(grower, seed);
    group.grow();
    contract_cluster(graph, grower.members(), {{"reduction", seed->op()}});
    ++groups;
  }
}

}  // namespace kiln
