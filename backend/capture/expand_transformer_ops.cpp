#include "backend/capture/expand_transformer_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace kiln {
namespace {

// The argument positions of aten::_transformer_encoder_layer_fwd.
enum LayerArg {
  kSrc,
  kEmbedDim,
  kNumHeads,
  kQkvWeight,
  kQkvBias,
  kProjWeight,
  kProjBias,
  kUseGelu,
  kNormFirst,
  kEps,
  kNormWeight1,
  kNormBias1,
  kNormWeight2,
  kNormBias2,
  kFfnWeight1,
  kFfnBias1,
  kFfnWeight2,
  kFfnBias2,
  kMask,
  kNumArgs = 20,  // and mask_type, which only matters with a mask
};

// The argument positions of aten::_native_multi_head_attention.
enum AttentionArg {
  kQuery,
  kKey,
  kValue,
  kAttentionEmbedDim,
  kAttentionNumHeads,
  kAttentionQkvWeight,
  kAttentionQkvBias,
  kAttentionProjWeight,
  kAttentionProjBias,
  kAttentionMask,
  kNeedWeights,
  kAttentionNumArgs = 13,  // and average_attn_weights and mask_type, which need weights or a mask
};

/// Appends ATen ops by name, every argument given (the importer runs each on meta tensors).
class OpWriter {
 public:
  explicit OpWriter(OpImporter& ops) : ops_(ops) {}

  ir::Value* call(const char* name, const char* overload, const std::vector<ImportArg>& args) {
    const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
    const RunOp run = [op](torch::jit::Stack& stack) { op.callBoxed(stack); };
    return ops_.add_op(op.schema(), run, args).at(0);
  }

  ir::Value* linear(ir::Value* x, ir::Value* weight, ir::Value* bias) {
    return call("aten::linear", "", {x, weight, bias});
  }
  ir::Value* add(ir::Value* a, ir::Value* b) {
    return call("aten::add", "Tensor", {a, b, c10::IValue(int64_t{1})});
  }
  ir::Value* layer_norm(ir::Value* x, int64_t dim, ir::Value* weight, ir::Value* bias, double eps) {
    return call("aten::layer_norm", "",
                {x, c10::IValue(std::vector<int64_t>{dim}), weight, bias, c10::IValue(eps),
                 c10::IValue(true)});
  }
  ir::Value* transpose(ir::Value* x, int64_t a, int64_t b) {
    return call("aten::transpose", "int", {x, c10::IValue(a), c10::IValue(b)});
  }

 private:
  OpImporter& ops_;
};

std::optional<int64_t> constant_int(const ImportArg& arg) {
  const auto* value = std::get_if<c10::IValue>(&arg);
  if (!value || !value->isInt()) return std::nullopt;
  return value->toInt();
}

std::optional<bool> constant_bool(const ImportArg& arg) {
  const auto* value = std::get_if<c10::IValue>(&arg);
  if (!value || !value->isBool()) return std::nullopt;
  return value->toBool();
}

/// Self-attention as ATen's fast path computes it: one projection to q, k and v, scaled
/// dot-product attention per head (ATen's fused CPU kernel: on this machine faster than two
/// matmuls and a softmax at 197 tokens, and at a few tokens, where it is one call instead of
/// three; scale 1/sqrt(head size)), the heads joined again and projected out.
/// x: [batch, length, embed].
ir::Value* self_attention(OpWriter& write, ir::Value* x, int64_t embed, int64_t heads,
                          ir::Value* qkv_weight, ir::Value* qkv_bias, ir::Value* proj_weight,
                          ir::Value* proj_bias) {
  const int64_t head_size = embed / heads;
  ir::Value* qkv = write.linear(x, qkv_weight, qkv_bias);
  // [batch, length, 3 * embed] -> [3, batch, heads, length, head_size]
  qkv = write.call(
      "aten::unflatten", "int",
      {qkv, c10::IValue(int64_t{-1}), c10::IValue(std::vector<int64_t>{3, heads, head_size})});
  qkv = write.call("aten::permute", "", {qkv, c10::IValue(std::vector<int64_t>{2, 0, 3, 1, 4})});
  auto part = [&](int64_t i) {
    return write.call("aten::select", "int", {qkv, c10::IValue(int64_t{0}), c10::IValue(i)});
  };
  ir::Value* heads_out = write.call("aten::scaled_dot_product_attention", "",
                                    {part(0), part(1), part(2), c10::IValue(), c10::IValue(0.0),
                                     c10::IValue(false), c10::IValue(), c10::IValue(false)});
  // [batch, heads, length, head_size] -> [batch, length, embed]
  ir::Value* joined = write.call(
      "aten::flatten", "using_ints",
      {write.transpose(heads_out, 1, 2), c10::IValue(int64_t{2}), c10::IValue(int64_t{-1})});
  return write.linear(joined, proj_weight, proj_bias);
}

bool all_tensors(const std::vector<ImportArg>& args, std::initializer_list<int> positions) {
  for (int a : positions)
    if (!std::holds_alternative<ir::Value*>(args[a])) return false;
  return true;
}

bool is_none(const ImportArg& arg) {
  const auto* value = std::get_if<c10::IValue>(&arg);
  return value && value->isNone();
}

/// Whether `x` is [batch, length, embed] in a float dtype and embed splits into the heads.
bool splits_into_heads(const OpImporter& ops, ir::Value* x, int64_t embed, int64_t heads) {
  const at::Tensor& meta = ops.meta(x);
  return meta.dim() == 3 && meta.is_floating_point() && meta.size(2) == embed && heads > 0 &&
         embed % heads == 0;
}

std::optional<std::vector<ir::Value*>> expand_encoder_layer(OpImporter& ops,
                                                            const std::vector<ImportArg>& args) {
  if (args.size() != kNumArgs || !is_none(args[kMask])) return std::nullopt;
  if (!all_tensors(args,
                   {kSrc, kQkvWeight, kQkvBias, kProjWeight, kProjBias, kNormWeight1, kNormBias1,
                    kNormWeight2, kNormBias2, kFfnWeight1, kFfnBias1, kFfnWeight2, kFfnBias2})) {
    return std::nullopt;
  }
  const auto embed = constant_int(args[kEmbedDim]);
  const auto heads = constant_int(args[kNumHeads]);
  const auto use_gelu = constant_bool(args[kUseGelu]);
  const auto norm_first = constant_bool(args[kNormFirst]);
  const auto* eps_value = std::get_if<c10::IValue>(&args[kEps]);
  if (!embed || !heads || !use_gelu || !norm_first || !eps_value || !eps_value->isDouble()) {
    return std::nullopt;
  }
  ir::Value* src = std::get<ir::Value*>(args[kSrc]);
  if (!splits_into_heads(ops, src, *embed, *heads)) return std::nullopt;
  const double eps = eps_value->toDouble();
  auto tensor = [&](LayerArg a) { return std::get<ir::Value*>(args[a]); };

  OpWriter write(ops);
  auto norm = [&](ir::Value* x, LayerArg weight, LayerArg bias) {
    return write.layer_norm(x, *embed, tensor(weight), tensor(bias), eps);
  };
  // Post-norm: x = norm1(x + attention(x)); x = norm2(x + ffn(x)).
  // Pre-norm:  x = x + attention(norm1(x)); x = x + ffn(norm2(x)).
  ir::Value* x = src;
  ir::Value* attended =
      self_attention(write, *norm_first ? norm(x, kNormWeight1, kNormBias1) : x, *embed, *heads,
                     tensor(kQkvWeight), tensor(kQkvBias), tensor(kProjWeight), tensor(kProjBias));
  x = write.add(x, attended);
  if (!*norm_first) x = norm(x, kNormWeight1, kNormBias1);
  ir::Value* hidden = write.linear(*norm_first ? norm(x, kNormWeight2, kNormBias2) : x,
                                   tensor(kFfnWeight1), tensor(kFfnBias1));
  hidden = *use_gelu ? write.call("aten::gelu", "", {hidden, c10::IValue(std::string("none"))})
                     : write.call("aten::relu", "", {hidden});
  x = write.add(x, write.linear(hidden, tensor(kFfnWeight2), tensor(kFfnBias2)));
  if (!*norm_first) x = norm(x, kNormWeight2, kNormBias2);
  return std::vector<ir::Value*>{x};
}

// Self-attention only (query, key and value one value) and without the weights, which ATen
// then returns as None: the second output is nullptr.
std::optional<std::vector<ir::Value*>> expand_multi_head_attention(
    OpImporter& ops, const std::vector<ImportArg>& args) {
  if (args.size() != kAttentionNumArgs || !is_none(args[kAttentionMask])) return std::nullopt;
  if (!all_tensors(args, {kQuery, kKey, kValue, kAttentionQkvWeight, kAttentionQkvBias,
                          kAttentionProjWeight, kAttentionProjBias})) {
    return std::nullopt;
  }
  auto tensor = [&](AttentionArg a) { return std::get<ir::Value*>(args[a]); };
  const auto embed = constant_int(args[kAttentionEmbedDim]);
  const auto heads = constant_int(args[kAttentionNumHeads]);
  const auto need_weights = constant_bool(args[kNeedWeights]);
  if (!embed || !heads || !need_weights || *need_weights) return std::nullopt;
  ir::Value* x = tensor(kQuery);
  if (tensor(kKey) != x || tensor(kValue) != x || !splits_into_heads(ops, x, *embed, *heads)) {
    return std::nullopt;
  }
  OpWriter write(ops);
  ir::Value* attended = self_attention(write, x, *embed, *heads, tensor(kAttentionQkvWeight),
                                       tensor(kAttentionQkvBias), tensor(kAttentionProjWeight),
                                       tensor(kAttentionProjBias));
  return std::vector<ir::Value*>{attended, nullptr};
}

}  // namespace

std::optional<std::vector<ir::Value*>> expand_transformer_op(OpImporter& ops, const std::string& op,
                                                             const std::vector<ImportArg>& args) {
  if (op == "aten::_transformer_encoder_layer_fwd") return expand_encoder_layer(ops, args);
  if (op == "aten::_native_multi_head_attention") return expand_multi_head_attention(ops, args);
  return std::nullopt;
}

}  // namespace kiln
