#include "runtime/onednn_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "runtime/onednn/matmul_primitive.h"
#include "runtime/onednn_packed.h"

namespace kiln {
namespace {

using onednn::Activation;
using onednn::MatmulPrimitive;
using onednn::MatmulSpec;

MatmulSpec make_spec(int64_t rows, const at::Tensor& weight, bool bias, Activation activation,
                     bool bf16) {
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == at::kFloat && weight.is_cpu(),
              "kiln::onednn_linear: weight must be a 2-D float32 CPU tensor, got ", weight.sizes(),
              " ", weight.scalar_type());
  MatmulSpec spec;
  spec.rows = rows;
  spec.n = weight.size(0);
  spec.k = weight.size(1);
  spec.bias = bias;
  spec.activation = activation;
  spec.bf16 = bf16;
  spec.threads = at::get_num_threads();
  const std::string problem = spec.problem();
  TORCH_CHECK(problem.empty(), "kiln::onednn_linear: ", problem, " (", rows, " rows, weight ",
              weight.sizes(), ")");
  return spec;
}

}  // namespace

onednn::Activation linear_activation_named(std::string_view name) {
  if (name == "none") return Activation::None;
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  if (name == "gelu_tanh") return Activation::GeluTanh;
  if (name == "silu") return Activation::Silu;
  if (name == "sigmoid") return Activation::Sigmoid;
  TORCH_CHECK(false,
              "kiln's oneDNN linear and matmul: activation must be \"none\", \"relu\", "
              "\"gelu\", \"gelu_tanh\", \"silu\" or \"sigmoid\", got \"",
              name, "\"");
}

void apply_linear_activation(at::Tensor& out, onednn::Activation activation) {
  switch (activation) {
    case Activation::Relu:
      out.relu_();
      break;
    case Activation::Gelu:
      out.copy_(at::gelu(out));
      break;
    case Activation::GeluTanh:
      out.copy_(at::gelu(out, "tanh"));
      break;
    case Activation::Silu:
      out.copy_(at::silu(out));
      break;
    case Activation::Sigmoid:
      out.sigmoid_();
      break;
    default:
      break;
  }
}

at::Tensor onednn_linear_weight(const at::Tensor& weight, int64_t rows, bool bias,
                                std::string_view activation, std::string_view precision) {
  const bool bf16 = multiplies_in_bf16(precision, "kiln::onednn_linear_weight");
  return pack_for(*MatmulPrimitive::get(
                      make_spec(rows, weight, bias, linear_activation_named(activation), bf16)),
                  weight);
}

at::Tensor& onednn_linear_out(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                              std::string_view activation, std::string_view precision,
                              std::string_view out_precision, at::Tensor& out) {
  const bool bf16 = multiplies_in_bf16(precision, "kiln::onednn_linear");
  const bool bf16_output = multiplies_in_bf16(out_precision, "kiln::onednn_linear (out_precision)");
  TORCH_CHECK(!bf16_output || bf16, "kiln::onednn_linear: out_precision \"bf16\" needs precision ",
              "\"bf16\"");
  // A bf16 input is a bf16 linear's only: the one that rounds its input to bf16 anyway.
  const bool bf16_input = input.scalar_type() == at::kBFloat16;
  TORCH_CHECK(input.dim() >= 1 && (input.scalar_type() == at::kFloat || (bf16 && bf16_input)) &&
                  input.is_cpu(),
              "kiln::onednn_linear: input must be a float32 CPU tensor (or bf16 where precision is "
              "\"bf16\"), got ",
              input.sizes(), " ", input.scalar_type(), " with precision \"", precision, "\"");
  TORCH_CHECK(weight.dim() == 2 && input.size(-1) == weight.size(1),
              "kiln::onednn_linear: input's last dim ", input.size(-1),
              " must be the weight's second, got weight ", weight.sizes());
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == weight.size(0) &&
                    bias->scalar_type() == at::kFloat && bias->is_cpu(),
                "kiln::onednn_linear: bias must be a float32 CPU vector of ", weight.size(0),
                " values, got ", bias->sizes(), " ", bias->scalar_type());
  }
  const at::ScalarType out_type = bf16_output ? at::kBFloat16 : at::kFloat;
  TORCH_CHECK(out.scalar_type() == out_type && out.is_cpu(), "kiln::onednn_linear: out must be a ",
              bf16_output ? "bf16" : "float32", " CPU tensor (out_precision \"", out_precision,
              "\"), got ", out.scalar_type(), " on ", out.device());
  std::vector<int64_t> out_sizes = input.sizes().vec();
  out_sizes.back() = weight.size(0);
  if (out.sizes() != at::IntArrayRef(out_sizes)) out.resize_(out_sizes);
  const int64_t rows = input.numel() / std::max<int64_t>(input.size(-1), 1);
  const Activation after = linear_activation_named(activation);
  if (rows == 0 || weight.size(1) == 0) {  // nothing to multiply: the bias, or zeros
    has_bias ? out.copy_(bias->expand(out_sizes)) : out.zero_();
    apply_linear_activation(out, after);
    return out;
  }
  MatmulSpec spec = make_spec(rows, weight, has_bias, after, bf16);
  spec.bf16_output = bf16_output;
  auto primitive = MatmulPrimitive::get(spec);
  at::Tensor repacked;
  const void* weight_data =
      packed_weight_for(*primitive, packed, weight, repacked, "kiln::onednn_linear");
  const at::Tensor x = input.contiguous();
  const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
  at::Tensor target =
      out.is_contiguous() && !out.is_same(x) ? out : at::empty(out_sizes, out.options());
  primitive->run(x.const_data_ptr(), weight_data, has_bias ? b.const_data_ptr<float>() : nullptr,
                 target.data_ptr(), bf16_input);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

namespace {

at::Tensor weight_op(const at::Tensor& weight, int64_t rows, bool bias, c10::string_view activation,
                     c10::string_view precision) {
  return onednn_linear_weight(weight, rows, bias, std::string_view(activation),
                              std::string_view(precision));
}

at::Tensor linear_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& packed,
                     const std::optional<at::Tensor>& bias, c10::string_view activation,
                     c10::string_view precision, c10::string_view out_precision) {
  std::vector<int64_t> sizes = input.sizes().vec();
  if (!sizes.empty() && weight.dim() == 2) sizes.back() = weight.size(0);
  const bool bf16_output = multiplies_in_bf16(out_precision, "kiln::onednn_linear (out_precision)");
  at::Tensor out =
      at::empty(sizes, input.options().dtype(bf16_output ? at::kBFloat16 : at::kFloat));
  return onednn_linear_out(input, weight, packed, bias, std::string_view(activation),
                           std::string_view(precision), std::string_view(out_precision), out);
}

at::Tensor& linear_out_op(const at::Tensor& input, const at::Tensor& weight,
                          const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                          c10::string_view activation, c10::string_view precision,
                          c10::string_view out_precision, at::Tensor& out) {
  return onednn_linear_out(input, weight, packed, bias, std::string_view(activation),
                           std::string_view(precision), std::string_view(out_precision), out);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def(
      "onednn_linear_weight(Tensor weight, int rows, bool bias, str activation=\"none\", "
      "str precision=\"fp32\") -> Tensor");
  m.def(
      "onednn_linear(Tensor input, Tensor weight, Tensor packed, Tensor? bias, "
      "str activation=\"none\", str precision=\"fp32\", str out_precision=\"fp32\") -> Tensor");
  m.def(
      "onednn_linear.out(Tensor input, Tensor weight, Tensor packed, Tensor? bias, "
      "str activation=\"none\", str precision=\"fp32\", str out_precision=\"fp32\", *, "
      "Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("onednn_linear_weight", &weight_op);
  m.impl("onednn_linear", &linear_op);
  m.impl("onednn_linear.out", &linear_out_op);
}

}  // namespace kiln
