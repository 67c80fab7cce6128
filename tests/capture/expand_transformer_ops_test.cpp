// expand_transformer_op: aten::_transformer_encoder_layer_fwd and
// aten::_native_multi_head_attention import as their parts, which compute what the fused ops
// compute; with a mask (or weights asked for, or cross-attention) they import whole.
#include "backend/capture/expand_transformer_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace kiln {
namespace {

constexpr int64_t kEmbed = 16, kHeads = 4, kHidden = 24;
const std::string kEncoderLayer = "aten::_transformer_encoder_layer_fwd";
const std::string kAttention = "aten::_native_multi_head_attention";

// The op's tensor arguments: src, then the weights in schema order.
std::vector<at::Tensor> layer_tensors() {
  at::manual_seed(0);
  return {at::randn({2, 5, kEmbed}), at::randn({3 * kEmbed, kEmbed}) * 0.2,
          at::randn({3 * kEmbed}),   at::randn({kEmbed, kEmbed}) * 0.2,
          at::randn({kEmbed}),       at::randn({kEmbed}),
          at::randn({kEmbed}),       at::randn({kEmbed}),
          at::randn({kEmbed}),       at::randn({kHidden, kEmbed}) * 0.2,
          at::randn({kHidden}),      at::randn({kEmbed, kHidden}) * 0.2,
          at::randn({kEmbed})};
}

// In schema order: tensors at their places, flags and sizes as constants.
template <typename T>
std::vector<T> layer_args(const std::vector<T>& t, bool use_gelu, bool norm_first, T mask) {
  return {t[0],
          T(c10::IValue(kEmbed)),
          T(c10::IValue(kHeads)),
          t[1],
          t[2],
          t[3],
          t[4],
          T(c10::IValue(use_gelu)),
          T(c10::IValue(norm_first)),
          T(c10::IValue(1e-5)),
          t[5],
          t[6],
          t[7],
          t[8],
          t[9],
          t[10],
          t[11],
          t[12],
          mask,
          T(c10::IValue())};
}

std::map<std::string, int> op_counts(const ir::Graph& graph) {
  std::map<std::string, int> counts;
  for (const ir::Node* node : graph.nodes())
    ++counts[node->op()];
  return counts;
}

TEST(ExpandTransformerOps, ImportsAsItsPartsWhichComputeTheFusedOp) {
  const auto fused =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::_transformer_encoder_layer_fwd", "");
  const std::vector<at::Tensor> tensors = layer_tensors();
  for (bool use_gelu : {false, true}) {
    for (bool norm_first : {false, true}) {
      SCOPED_TRACE(std::string(use_gelu ? "gelu" : "relu") + (norm_first ? ", pre-norm" : ""));
      OpImporter importer(tensors);
      std::vector<ImportArg> inputs;
      for (size_t i = 0; i < tensors.size(); ++i)
        inputs.emplace_back(importer.input(i));
      auto parts = expand_transformer_op(
          importer, kEncoderLayer,
          layer_args<ImportArg>(inputs, use_gelu, norm_first, ImportArg(c10::IValue())));
      ASSERT_TRUE(parts.has_value());
      ASSERT_EQ(parts->size(), 1u);
      EXPECT_EQ(parts->at(0)->type().sizes, (std::vector<int64_t>{2, 5, kEmbed}));
      std::map<std::string, int> ops = op_counts(*importer.finish().graph);
      EXPECT_EQ(ops["aten::linear"], 4);
      EXPECT_EQ(ops["aten::layer_norm"], 2);
      EXPECT_EQ(ops["aten::scaled_dot_product_attention"], 1);
      EXPECT_EQ(ops[use_gelu ? "aten::gelu" : "aten::relu"], 1);
      EXPECT_EQ(ops.count("aten::_transformer_encoder_layer_fwd"), 0u);

      // The parts, run eagerly op by op through the same ATen kernels, against the fused op.
      std::vector<c10::IValue> values(tensors.begin(), tensors.end());
      torch::jit::Stack stack = layer_args<c10::IValue>(values, use_gelu, norm_first, {});
      fused.callBoxed(stack);
      const at::Tensor expected = stack.at(0).toTensor();
      const at::Tensor& src = tensors[0];
      const double scale = 1.0 / std::sqrt(static_cast<double>(kEmbed / kHeads));
      auto attention = [&](const at::Tensor& x) {
        auto qkv =
            at::linear(x, tensors[1], tensors[2]).unflatten(-1, {3, kHeads, kEmbed / kHeads});
        qkv = qkv.permute({2, 0, 3, 1, 4});
        auto weights = at::softmax(at::matmul(qkv[0] * scale, qkv[1].transpose(-2, -1)), -1);
        return at::linear(at::matmul(weights, qkv[2]).transpose(1, 2).flatten(2), tensors[3],
                          tensors[4]);
      };
      auto norm = [&](const at::Tensor& x, int w) {
        return at::layer_norm(x, {kEmbed}, tensors[w], tensors[w + 1], 1e-5);
      };
      auto ffn = [&](const at::Tensor& x) {
        auto h = at::linear(x, tensors[9], tensors[10]);
        return at::linear(use_gelu ? at::gelu(h) : at::relu(h), tensors[11], tensors[12]);
      };
      at::Tensor x = src;
      if (norm_first) {
        x = x + attention(norm(x, 5));
        x = x + ffn(norm(x, 7));
      } else {
        x = norm(x + attention(x), 5);
        x = norm(x + ffn(x), 7);
      }
      EXPECT_TRUE(at::allclose(x, expected, 1e-4, 1e-5))
          << (x - expected).abs().max().item<double>();
    }
  }
}

TEST(ExpandTransformerOps, AMaskOrAFlagThatIsNotConstantKeepsTheOpWhole) {
  const std::vector<at::Tensor> tensors = layer_tensors();
  std::vector<at::Tensor> with_mask = tensors;
  with_mask.push_back(at::zeros({2, 5}, at::kBool));
  OpImporter importer(with_mask);
  std::vector<ImportArg> inputs;
  for (size_t i = 0; i < tensors.size(); ++i)
    inputs.emplace_back(importer.input(i));
  EXPECT_FALSE(expand_transformer_op(
      importer, kEncoderLayer, layer_args<ImportArg>(inputs, false, false, importer.input(13))));
  std::vector<ImportArg> args = layer_args<ImportArg>(inputs, false, false, c10::IValue());
  args[2] = importer.input(0);  // num_heads: not a constant
  EXPECT_FALSE(expand_transformer_op(importer, kEncoderLayer, args));
  EXPECT_EQ(importer.finish().graph->num_nodes(), 0u);
}

// Self-attention without weights: two outputs, the weights nullptr (ATen returns None); the
// attention matches the fused op. Weights asked for, or a key that is not the query: whole.
TEST(ExpandTransformerOps, SelfAttentionWithoutWeightsImportsAsItsParts) {
  const auto fused = c10::Dispatcher::singleton().findSchemaOrThrow(kAttention.c_str(), "");
  const std::vector<at::Tensor> t = layer_tensors();  // src, qkv weight and bias, proj ...
  OpImporter importer({t[0], t[1], t[2], t[3], t[4]});
  ir::Value* x = importer.input(0);
  auto args = [&](ImportArg key, bool need_weights) {
    return std::vector<ImportArg>{x,
                                  key,
                                  x,
                                  c10::IValue(kEmbed),
                                  c10::IValue(kHeads),
                                  importer.input(1),
                                  importer.input(2),
                                  importer.input(3),
                                  importer.input(4),
                                  c10::IValue(),
                                  c10::IValue(need_weights),
                                  c10::IValue(true),
                                  c10::IValue()};
  };
  EXPECT_FALSE(expand_transformer_op(importer, kAttention, args(x, true)));
  EXPECT_FALSE(expand_transformer_op(importer, kAttention, args(importer.input(3), false)));
  auto parts = expand_transformer_op(importer, kAttention, args(x, false));
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(parts->at(1), nullptr);
  EXPECT_EQ(parts->at(0)->type().sizes, (std::vector<int64_t>{2, 5, kEmbed}));
  std::map<std::string, int> ops = op_counts(*importer.finish().graph);
  EXPECT_EQ(ops["aten::linear"], 2);
  EXPECT_EQ(ops["aten::scaled_dot_product_attention"], 1);

  torch::jit::Stack stack = {t[0], t[0], t[0],          kEmbed, kHeads, t[1],         t[2],
                             t[3], t[4], c10::IValue(), false,  true,   c10::IValue()};
  fused.callBoxed(stack);
  EXPECT_FALSE(stack.at(1).isTensor() && stack.at(1).toTensor().defined());  // no weights
  const int64_t head = kEmbed / kHeads;
  auto qkv = at::linear(t[0], t[1], t[2]).unflatten(-1, {3, kHeads, head}).permute({2, 0, 3, 1, 4});
  auto weights = at::softmax(at::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(head), -1);
  auto expected = at::linear(at::matmul(weights, qkv[2]).transpose(1, 2).flatten(2), t[3], t[4]);
  EXPECT_TRUE(at::allclose(stack.at(0).toTensor(), expected, 1e-4, 1e-5));
}

}  // namespace
}  // namespace kiln
