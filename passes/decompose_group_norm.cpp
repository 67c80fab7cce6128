#include "passes/decompose_group_norm.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::DType;
using ir::Node;
using ir::TensorType;
using ir::Value;

class Decomposer final : public NodeRewriter {
 public:
  explicit Decomposer(ir::Graph& graph) : NodeRewriter(graph), uses_(ir::count_uses(graph)) {}

 private:
  bool applies(const Node& node) const override {
    if (node.op() == "aten::group_norm") return true;
    // torch.compile's inference group norm; its mean and rstd outputs are for a backward.
    return node.op() == "aten::native_group_norm" && node.outputs().size() == 3 &&
           !is_read(node.output(1)) && !is_read(node.output(2));
  }

  bool is_read(const Value* v) const {
    auto found = uses_.find(v);
    return found != uses_.end() && found->second > 0;
  }

  bool rewrite(Node& gn) override {
    const TensorType& x = gn.input(0)->type();
    const TensorType& out = gn.output()->type();
    if (out.dtype != DType::Float32 && out.dtype != DType::Float64) return false;
    if (x.dtype != out.dtype || x.rank() < 3 || x.numel() == 0) return false;
    const auto* groups = std::get_if<int64_t>(gn.find_attr("num_groups"));
    if (!groups) groups = std::get_if<int64_t>(gn.find_attr("group"));  // native_group_norm
    const auto* eps = std::get_if<double>(gn.find_attr("eps"));
    const int64_t n = x.sizes[0], channels = x.sizes[1];
    if (!groups || !eps || *groups <= 0 || channels % *groups != 0) return false;
    // Present optional tensors are inputs after the first (weight, then bias); absent ones are
    // None attributes.
    Value* weight = gn.find_attr("weight") ? nullptr : input_or_null(gn, 1);
    Value* bias = gn.find_attr("bias") ? nullptr : input_or_null(gn, weight ? 2 : 1);
    if (!weight || !is_per_channel(weight, out.dtype, channels)) return false;
    if (bias && !is_per_channel(bias, out.dtype, channels)) return false;

    const int64_t g = *groups, per_group = channels / g;
    // Per sample and channel: the mean and variance over the spatial dims, one walk over x in
    // whatever layout it has by then (channels-last: neighbouring rows are neighbours in memory).
    std::vector<int64_t> spatial_dims, per_channel(x.rank(), 1);
    for (int d = 2; d < x.rank(); ++d)
      spatial_dims.push_back(d);
    per_channel[0] = n;
    per_channel[1] = channels;
    const TensorType channel_stat = with_sizes(x, per_channel);
    Value* channel_var = variance(gn.input(0), spatial_dims, channel_stat);
    Value* channel_mean = mean(gn.input(0), spatial_dims, channel_stat);
    // Per group, from its channels' (equal-sized) statistics: the mean of their means, and the
    // mean of their variances plus the variance of their means (the law of total variance).
    const std::vector<int64_t> grouped = {n, g, per_group};
    auto by_group = [&](Value* v) {
      return add("aten::view", {v}, with_sizes(v->type(), grouped), {{"size", grouped}});
    };
    const TensorType group_stat = with_sizes(x, {n, g, 1});
    const std::vector<int64_t> within_group = {2};
    Value* means = by_group(channel_mean);
    Value* group_mean = mean(means, within_group, group_stat);
    Value* group_var = add("aten::add.Tensor",
                           {mean(by_group(channel_var), within_group, group_stat),
                            variance(means, within_group, group_stat)},
                           group_stat, {{"alpha", int64_t{1}}});
    Value* rstd = add("aten::rsqrt",
                      {add("aten::add.Scalar", {group_var}, group_stat,
                           {{"other", *eps}, {"alpha", int64_t{1}}})},
                      group_stat);
    // scale = rstd * gamma, shift = beta - mean * scale, per sample and channel as [N, G, D].
    const std::vector<int64_t> per_group_channels = {1, g, per_group};
    auto grouped_vector = [&](Value* v) {
      return add("aten::view", {v}, with_sizes(v->type(), per_group_channels),
                 {{"size", per_group_channels}});
    };
    const TensorType affine = with_sizes(x, grouped);
    Value* scale = add("aten::mul.Tensor", {rstd, grouped_vector(weight)}, affine);
    Value* mean_scaled = add("aten::mul.Tensor", {group_mean, scale}, affine);
    Value* shift = bias ? add("aten::sub.Tensor", {grouped_vector(bias), mean_scaled}, affine,
                              {{"alpha", int64_t{1}}})
                        : add("aten::neg", {mean_scaled}, affine);
    // [N, G, D] -> [N, C, 1, ...], lined up with x's channels.
    scale = add("aten::view", {scale}, channel_stat, {{"size", per_channel}});
    shift = add("aten::view", {shift}, channel_stat, {{"size", per_channel}});
    Value* scaled = add("aten::mul.Tensor", {gn.input(0), scale}, out);
    replace_with_added(gn, add("aten::add.Tensor", {scaled, shift}, out, {{"alpha", int64_t{1}}}));
    return true;
  }

  Value* mean(Value* v, const std::vector<int64_t>& dims, const TensorType& type) {
    return add("aten::mean.dim", {v}, type,
               {{"dim", dims}, {"keepdim", true}, {"dtype", ir::NoneAttr{}}});
  }

  /// The population variance (correction 0), as group norm normalizes with.
  Value* variance(Value* v, const std::vector<int64_t>& dims, const TensorType& type) {
    return add("aten::var.correction", {v}, type,
               {{"dim", dims}, {"correction", int64_t{0}}, {"keepdim", true}});
  }

  static Value* input_or_null(const Node& node, size_t index) {
    return index < node.inputs().size() ? node.input(index) : nullptr;
  }

  static bool is_per_channel(const Value* v, DType dtype, int64_t channels) {
    return v->type().dtype == dtype && v->type().sizes == std::vector<int64_t>{channels};
  }

  std::unordered_map<const Value*, int> uses_;
};

}  // namespace

int decompose_group_norm(ir::Graph& graph) {
  Decomposer decomposer(graph);
  return decomposer.run();
}

}  // namespace kiln
