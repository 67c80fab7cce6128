#include "passes/decompose_batch_norm.h"

#include <cstdint>
#include <vector>

#include "passes/batch_norm_rewriter.h"

namespace kiln {
namespace {

using ir::DType;
using ir::Node;
using ir::TensorType;
using ir::Value;

class Decomposer final : public BatchNormRewriter {
 public:
  using BatchNormRewriter::BatchNormRewriter;

 private:
  bool rewrite(Node& bn) override {
    const TensorType& out = bn.output()->type();
    if (out.dtype != DType::Float32 && out.dtype != DType::Float64) return false;
    if (out.rank() < 2 || bn.input(0)->type().dtype != out.dtype) return false;
    const int64_t channels = out.sizes[1];
    auto args = batch_norm_arguments(bn);
    // Without running statistics an eval-mode batch norm normalizes with the batch's own.
    if (!args.count("running_mean") || !args.count("running_var")) return false;
    for (const auto& [name, v] : args) {
      const TensorType& t = v->type();
      if (!is_constant(v) || t.dtype != out.dtype || t.sizes != std::vector<int64_t>{channels})
        return false;
    }
    const auto* eps = std::get_if<double>(bn.find_attr("eps"));
    if (!eps) return false;

    const TensorType vec = with_sizes(out, {channels});
    // scale = gamma * rsqrt(var + eps); shift = beta - mean * scale (or -mean * scale).
    Value* scale = per_channel_scale(args, *eps, vec);
    Value* mean_scaled = add("aten::mul.Tensor", {args["running_mean"], scale}, vec);
    Value* shift = args.count("bias") ? add("aten::sub.Tensor", {args["bias"], mean_scaled}, vec,
                                            {{"alpha", int64_t{1}}})
                                      : add("aten::neg", {mean_scaled}, vec);
    // [C] -> [C, 1, ...]: channels are dim 1, and broadcasting aligns trailing dims.
    std::vector<int64_t> per_channel(out.rank() - 1, 1);
    per_channel[0] = channels;
    if (per_channel.size() > 1) {
      scale = add("aten::view", {scale}, with_sizes(vec, per_channel), {{"size", per_channel}});
      shift = add("aten::view", {shift}, with_sizes(vec, per_channel), {{"size", per_channel}});
    }
    Value* scaled = add("aten::mul.Tensor", {bn.input(0), scale}, out);
    replace_with_added(bn, add("aten::add.Tensor", {scaled, shift}, out, {{"alpha", int64_t{1}}}));
    return true;
  }
};

}  // namespace

int decompose_batch_norm(ir::Graph& graph) {
  Decomposer decomposer(graph);
  return decomposer.run();
}

}  // namespace kiln
