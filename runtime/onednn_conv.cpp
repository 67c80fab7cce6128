#include "runtime/onednn_conv.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>

#include "runtime/onednn/conv_primitive.h"
#include "runtime/onednn_packed.h"

namespace kiln {
namespace {

using onednn::Activation;
using onednn::ConvPrimitive;
using onednn::ConvSpec;

template <size_t N>
std::array<int64_t, N> fixed(at::IntArrayRef values, const char* what) {
  TORCH_CHECK(values.size() == N, "kiln::onednn_conv2d: ", what, " must have ", N, " values, got ",
              values);
  std::array<int64_t, N> out{};
  std::copy(values.begin(), values.end(), out.begin());
  return out;
}

void set_activation(ConvSpec& spec, std::string_view activation,
                    const std::vector<double>& scalars) {
  if (activation == "none") {
    spec.activation = Activation::None;
  } else if (activation == "relu") {
    spec.activation = Activation::Relu;
  } else if (activation == "hardtanh") {
    TORCH_CHECK(scalars.size() == 2, "kiln::onednn_conv2d: hardtanh takes scalars [min, max], got ",
                scalars.size(), " values");
    spec.activation = Activation::Clip;
    spec.lo = static_cast<float>(scalars[0]);
    spec.hi = static_cast<float>(scalars[1]);
  } else if (activation == "silu") {
    spec.activation = Activation::Silu;
  } else if (activation == "sigmoid") {
    spec.activation = Activation::Sigmoid;
  } else if (activation == "hardswish") {
    spec.activation = Activation::Hardswish;
  } else if (activation == "hardsigmoid") {
    spec.activation = Activation::Hardsigmoid;
  } else {
    TORCH_CHECK(false,
                "kiln::onednn_conv2d: activation must be \"none\", \"relu\", \"hardtanh\", "
                "\"silu\", \"sigmoid\", \"hardswish\" or \"hardsigmoid\", got \"",
                activation, "\"");
  }
}

ConvSpec make_spec(at::IntArrayRef input_size, const at::Tensor& weight, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool bias,
                   bool residual, std::string_view activation, const std::vector<double>& scalars,
                   bool bf16) {
  TORCH_CHECK(weight.dim() == 4 && weight.scalar_type() == at::kFloat && weight.is_cpu(),
              "kiln::onednn_conv2d: weight must be a 4-D float32 CPU tensor, got ", weight.sizes(),
              " ", weight.scalar_type());
  ConvSpec spec;
  spec.input = fixed<4>(input_size, "the input size");
  spec.weight = fixed<4>(weight.sizes(), "the weight's size");
  spec.stride = fixed<2>(stride, "stride");
  spec.padding = fixed<2>(padding, "padding");
  spec.dilation = fixed<2>(dilation, "dilation");
  spec.groups = groups;
  spec.bias = bias;
  spec.residual = residual;
  spec.bf16 = bf16;
  set_activation(spec, activation, scalars);
  spec.threads = at::get_num_threads();
  const std::string problem = spec.problem();
  TORCH_CHECK(problem.empty(), "kiln::onednn_conv2d: ", problem, " (input ", input_size,
              ", weight ", weight.sizes(), ", groups ", groups, ")");
  return spec;
}

bool dense_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast);
}

}  // namespace

at::Tensor onednn_conv2d_weight(const at::Tensor& weight, at::IntArrayRef input_size,
                                at::IntArrayRef stride, at::IntArrayRef padding,
                                at::IntArrayRef dilation, int64_t groups, bool bias, bool residual,
                                std::string_view activation, const std::vector<double>& scalars,
                                std::string_view precision) {
  const ConvSpec spec =
      make_spec(input_size, weight, stride, padding, dilation, groups, bias, residual, activation,
                scalars, multiplies_in_bf16(precision, "kiln::onednn_conv2d_weight"));
  return pack_for(*ConvPrimitive::get(spec), weight);
}

at::Tensor& onednn_conv2d_out(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                              const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                              std::string_view activation, const std::vector<double>& scalars,
                              std::string_view precision, std::string_view out_precision,
                              at::Tensor& out) {
  const bool bf16 = multiplies_in_bf16(precision, "kiln::onednn_conv2d");
  const bool bf16_output = multiplies_in_bf16(out_precision, "kiln::onednn_conv2d (out_precision)");
  TORCH_CHECK(!bf16_output || bf16, "kiln::onednn_conv2d: out_precision \"bf16\" needs precision ",
              "\"bf16\"");
  // bf16 tensors are a bf16 convolution's only: the one that multiplies in bf16 anyway.
  const auto allowed = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat || (bf16 && t.scalar_type() == at::kBFloat16);
  };
  TORCH_CHECK(input.dim() == 4 && allowed(input) && input.is_cpu(), "kiln::onednn_conv2d: input ",
              "must be a 4-D float32 CPU tensor (or bf16 where precision is \"bf16\"), got ",
              input.sizes(), " ", input.scalar_type(), " with precision \"", precision, "\"");
  const bool has_bias = bias.has_value() && bias->defined();
  const bool has_other = other.has_value() && other->defined();
  ConvSpec spec = make_spec(input.sizes(), weight, stride, padding, dilation, groups, has_bias,
                            has_other, activation, scalars, bf16);
  spec.bf16_output = bf16_output;
  spec.bf16_residual = has_other && other->scalar_type() == at::kBFloat16;
  const auto output_size = spec.output();
  const std::vector<int64_t> out_sizes(output_size.begin(), output_size.end());
  if (has_bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == spec.weight[0] &&
                    bias->scalar_type() == at::kFloat && bias->is_cpu(),
                "kiln::onednn_conv2d: bias must be a float32 CPU vector of ", spec.weight[0],
                " values, got ", bias->sizes(), " ", bias->scalar_type());
  }
  if (has_other) {
    TORCH_CHECK(other->sizes() == at::IntArrayRef(out_sizes) && allowed(*other) && other->is_cpu(),
                "kiln::onednn_conv2d: other must be a float32 CPU tensor (or bf16 where precision ",
                "is \"bf16\") of the output's sizes ", out_sizes, ", got ", other->sizes(), " ",
                other->scalar_type(), " on ", other->device());
  }
  const at::ScalarType out_type = bf16_output ? at::kBFloat16 : at::kFloat;
  TORCH_CHECK(out.scalar_type() == out_type && out.is_cpu(), "kiln::onednn_conv2d: out must be a ",
              bf16_output ? "bf16" : "float32", " CPU tensor (out_precision \"", out_precision,
              "\"), got ", out.scalar_type(), " on ", out.device());
  // A dense NCHW float32 input (a network's image, whose channels-last copy onednn_conv took out
  // of the graph) is converted by oneDNN's reorder inside; any other layout by ATen first.
  const bool bf16_input = input.scalar_type() == at::kBFloat16;
  const bool nchw = !bf16_input && !dense_channels_last(input) && input.is_contiguous();
  const at::Tensor x =
      dense_channels_last(input) || nchw ? input : input.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor residual;
  if (has_other) {
    residual =
        dense_channels_last(*other) ? *other : other->contiguous(at::MemoryFormat::ChannelsLast);
  }
  const at::Tensor b = has_bias ? bias->contiguous() : at::Tensor();
  if (out.sizes() != at::IntArrayRef(out_sizes)) out.resize_(out_sizes);
  // The memory plan may have put the output over a residual that dies here: the convolution then
  // adds into it where it lies. Any other overlap with an operand goes through a buffer of its own.
  const bool over_residual = has_other && residual.scalar_type() == out_type &&
                             out.data_ptr() == residual.data_ptr() &&
                             out.strides() == residual.strides();
  const auto overlaps = [&](const at::Tensor& t) {
    return at::get_overlap_status(out, t) != at::MemOverlapStatus::No;
  };
  at::Tensor target = out;
  if (!dense_channels_last(out) || overlaps(x) ||
      (has_other && !over_residual && overlaps(residual))) {
    target = at::empty(out_sizes, out.options().memory_format(at::MemoryFormat::ChannelsLast));
  }
  spec.accumulate = over_residual && target.is_same(out);
  auto primitive = ConvPrimitive::get(spec);
  at::Tensor repacked;
  const void* weight_data =
      packed_weight_for(*primitive, packed, weight, repacked, "kiln::onednn_conv2d");
  using Source = ConvPrimitive::Source;
  primitive->run(x.const_data_ptr(), weight_data, has_bias ? b.const_data_ptr<float>() : nullptr,
                 has_other ? residual.const_data_ptr() : nullptr, target.data_ptr(),
                 bf16_input ? Source::NhwcBf16
                 : nchw     ? Source::Nchw
                            : Source::Nhwc);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

namespace {

at::Tensor weight_op(const at::Tensor& weight, at::IntArrayRef input_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool bias,
                     bool residual, c10::string_view activation, at::ArrayRef<double> scalars,
                     c10::string_view precision) {
  return onednn_conv2d_weight(weight, input_size, stride, padding, dilation, groups, bias, residual,
                              std::string_view(activation), scalars.vec(),
                              std::string_view(precision));
}

at::Tensor& conv_out_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& packed,
                        const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                        c10::string_view activation, at::ArrayRef<double> scalars,
                        c10::string_view precision, c10::string_view out_precision,
                        at::Tensor& out) {
  return onednn_conv2d_out(input, weight, packed, bias, other, stride, padding, dilation, groups,
                           std::string_view(activation), scalars.vec(), std::string_view(precision),
                           std::string_view(out_precision), out);
}

at::Tensor conv_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& packed,
                   const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& other,
                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                   int64_t groups, c10::string_view activation, at::ArrayRef<double> scalars,
                   c10::string_view precision, c10::string_view out_precision) {
  // Sized here, so the out= form finds a channels-last output to write into directly. make_spec
  // checks the arguments as the out= form would.
  TORCH_CHECK(input.dim() == 4, "kiln::onednn_conv2d: input must be 4-D, got ", input.sizes());
  const bool has_bias = bias.has_value() && bias->defined();
  const bool has_other = other.has_value() && other->defined();
  const auto sizes = make_spec(input.sizes(), weight, stride, padding, dilation, groups, has_bias,
                               has_other, std::string_view(activation), scalars.vec(),
                               multiplies_in_bf16(precision, "kiln::onednn_conv2d"))
                         .output();
  const bool bf16_output = multiplies_in_bf16(out_precision, "kiln::onednn_conv2d (out_precision)");
  at::Tensor out = at::empty(std::vector<int64_t>(sizes.begin(), sizes.end()),
                             input.options()
                                 .dtype(bf16_output ? at::kBFloat16 : at::kFloat)
                                 .memory_format(at::MemoryFormat::ChannelsLast));
  return conv_out_op(input, weight, packed, bias, other, stride, padding, dilation, groups,
                     activation, scalars, precision, out_precision, out);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def(
      "onednn_conv2d_weight(Tensor weight, int[] input_size, int[] stride, int[] padding, "
      "int[] dilation, int groups, bool bias, bool residual, str activation, float[] scalars, "
      "str precision=\"fp32\") -> Tensor");
  m.def(
      "onednn_conv2d(Tensor input, Tensor weight, Tensor packed, Tensor? bias, Tensor? other, "
      "int[] stride, int[] padding, int[] dilation, int groups, str activation, "
      "float[] scalars, str precision=\"fp32\", str out_precision=\"fp32\") -> Tensor");
  m.def(
      "onednn_conv2d.out(Tensor input, Tensor weight, Tensor packed, Tensor? bias, "
      "Tensor? other, int[] stride, int[] padding, int[] dilation, int groups, str activation, "
      "float[] scalars, str precision=\"fp32\", str out_precision=\"fp32\", *, "
      "Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("onednn_conv2d_weight", &weight_op);
  m.impl("onednn_conv2d", &conv_op);
  m.impl("onednn_conv2d.out", &conv_out_op);
}

}  // namespace kiln
