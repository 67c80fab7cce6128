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

/// Which of the two ops is running: kiln::onednn_conv2d (NHWC) or kiln::onednn_conv3d (NDHWC).
struct ConvOp {
  const char* name;
  int spatial;
  int rank() const { return 2 + spatial; }
  at::MemoryFormat channels_last() const {
    return spatial == 3 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  }
};

constexpr ConvOp kConv2d{"kiln::onednn_conv2d", 2};
constexpr ConvOp kConv3d{"kiln::onednn_conv3d", 3};

/// `values` into the front of `out` (its other entries keep their defaults); exactly `n` of them.
template <size_t N>
void fill(std::array<int64_t, N>& out, at::IntArrayRef values, size_t n, const ConvOp& op,
          const char* what) {
  TORCH_CHECK(values.size() == n, op.name, ": ", what, " must have ", n, " values, got ", values);
  std::copy(values.begin(), values.end(), out.begin());
}

void set_activation(ConvSpec& spec, std::string_view activation, const std::vector<double>& scalars,
                    const ConvOp& op) {
  if (activation == "none") {
    spec.activation = Activation::None;
  } else if (activation == "relu") {
    spec.activation = Activation::Relu;
  } else if (activation == "hardtanh") {
    TORCH_CHECK(scalars.size() == 2, op.name, ": hardtanh takes scalars [min, max], got ",
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
    TORCH_CHECK(false, op.name,
                ": activation must be \"none\", \"relu\", \"hardtanh\", "
                "\"silu\", \"sigmoid\", \"hardswish\" or \"hardsigmoid\", got \"",
                activation, "\"");
  }
}

ConvSpec make_spec(const ConvOp& op, at::IntArrayRef input_size, const at::Tensor& weight,
                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                   int64_t groups, bool bias, bool residual, std::string_view activation,
                   const std::vector<double>& scalars, bool bf16) {
  TORCH_CHECK(weight.dim() == op.rank() && weight.scalar_type() == at::kFloat && weight.is_cpu(),
              op.name, ": weight must be a ", op.rank(), "-D float32 CPU tensor, got ",
              weight.sizes(), " ", weight.scalar_type());
  ConvSpec spec;
  spec.spatial = op.spatial;
  fill(spec.input, input_size, op.rank(), op, "the input size");
  fill(spec.weight, weight.sizes(), op.rank(), op, "the weight's size");
  fill(spec.stride, stride, op.spatial, op, "stride");
  fill(spec.padding, padding, op.spatial, op, "padding");
  fill(spec.dilation, dilation, op.spatial, op, "dilation");
  spec.groups = groups;
  spec.bias = bias;
  spec.residual = residual;
  spec.bf16 = bf16;
  set_activation(spec, activation, scalars, op);
  spec.threads = at::get_num_threads();
  const std::string problem = spec.problem();
  TORCH_CHECK(problem.empty(), op.name, ": ", problem, " (input ", input_size, ", weight ",
              weight.sizes(), ", groups ", groups, ")");
  return spec;
}

bool dense_channels_last(const at::Tensor& t, const ConvOp& op) {
  return t.dim() == op.rank() && t.is_contiguous(op.channels_last());
}

/// The output's sizes, as the out= form checks and writes them.
std::vector<int64_t> output_sizes(const ConvSpec& spec) {
  const auto sizes = spec.output();
  return std::vector<int64_t>(sizes.begin(), sizes.begin() + spec.rank());
}

at::Tensor pack_weight(const ConvOp& op, const at::Tensor& weight, at::IntArrayRef input_size,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                       int64_t groups, bool bias, bool residual, std::string_view activation,
                       const std::vector<double>& scalars, std::string_view precision) {
  const ConvSpec spec =
      make_spec(op, input_size, weight, stride, padding, dilation, groups, bias, residual,
                activation, scalars, multiplies_in_bf16(precision, op.name));
  return pack_for(*ConvPrimitive::get(spec), weight);
}

at::Tensor& run_conv(const ConvOp& op, const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                     std::string_view activation, const std::vector<double>& scalars,
                     std::string_view precision, std::string_view out_precision, at::Tensor& out) {
  const bool bf16 = multiplies_in_bf16(precision, op.name);
  const bool bf16_output =
      multiplies_in_bf16(out_precision, (std::string(op.name) + " (out_precision)").c_str());
  TORCH_CHECK(!bf16_output || bf16, op.name, ": out_precision \"bf16\" needs precision \"bf16\"");
  // bf16 tensors are a bf16 convolution's only: the one that multiplies in bf16 anyway.
  const auto allowed = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat || (bf16 && t.scalar_type() == at::kBFloat16);
  };
  TORCH_CHECK(input.dim() == op.rank() && allowed(input) && input.is_cpu(), op.name,
              ": input must be a ", op.rank(),
              "-D float32 CPU tensor (or bf16 where precision is \"bf16\"), got ", input.sizes(),
              " ", input.scalar_type(), " with precision \"", precision, "\"");
  const bool has_bias = bias.has_value() && bias->defined();
  const bool has_other = other.has_value() && other->defined();
  ConvSpec spec = make_spec(op, input.sizes(), weight, stride, padding, dilation, groups, has_bias,
                            has_other, activation, scalars, bf16);
  spec.bf16_output = bf16_output;
  spec.bf16_residual = has_other && other->scalar_type() == at::kBFloat16;
  const std::vector<int64_t> out_sizes = output_sizes(spec);
  if (has_bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == spec.weight[0] &&
                    bias->scalar_type() == at::kFloat && bias->is_cpu(),
                op.name, ": bias must be a float32 CPU vector of ", spec.weight[0], " values, got ",
                bias->sizes(), " ", bias->scalar_type());
  }
  if (has_other) {
    TORCH_CHECK(other->sizes() == at::IntArrayRef(out_sizes) && allowed(*other) && other->is_cpu(),
                op.name, ": other must be a float32 CPU tensor (or bf16 where precision is ",
                "\"bf16\") of the output's sizes ", out_sizes, ", got ", other->sizes(), " ",
                other->scalar_type(), " on ", other->device());
  }
  const at::ScalarType out_type = bf16_output ? at::kBFloat16 : at::kFloat;
  TORCH_CHECK(out.scalar_type() == out_type && out.is_cpu(), op.name, ": out must be a ",
              bf16_output ? "bf16" : "float32", " CPU tensor (out_precision \"", out_precision,
              "\"), got ", out.scalar_type(), " on ", out.device());
  // A dense NCHW (NCDHW) float32 input (a network's image, whose channels-last copy onednn_conv
  // took out of the graph) is converted by oneDNN's reorder inside; any other layout by ATen first.
  const bool bf16_input = input.scalar_type() == at::kBFloat16;
  const bool nchw = !bf16_input && !dense_channels_last(input, op) && input.is_contiguous();
  const at::Tensor x =
      dense_channels_last(input, op) || nchw ? input : input.contiguous(op.channels_last());
  at::Tensor residual;
  if (has_other) {
    residual = dense_channels_last(*other, op) ? *other : other->contiguous(op.channels_last());
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
  if (!dense_channels_last(out, op) || overlaps(x) ||
      (has_other && !over_residual && overlaps(residual))) {
    target = at::empty(out_sizes, out.options().memory_format(op.channels_last()));
  }
  spec.accumulate = over_residual && target.is_same(out);
  auto primitive = ConvPrimitive::get(spec);
  at::Tensor repacked;
  const void* weight_data = packed_weight_for(*primitive, packed, weight, repacked, op.name);
  using Source = ConvPrimitive::Source;
  primitive->run(x.const_data_ptr(), weight_data, has_bias ? b.const_data_ptr<float>() : nullptr,
                 has_other ? residual.const_data_ptr() : nullptr, target.data_ptr(),
                 bf16_input ? Source::NhwcBf16
                 : nchw     ? Source::Nchw
                            : Source::Nhwc);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

}  // namespace

/// The op of this weight's rank: a 4-D weight's kiln::onednn_conv2d, a 5-D one's
/// kiln::onednn_conv3d.
const ConvOp& op_for(const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 4 || weight.dim() == 5,
              "kiln::onednn_conv2d/3d: weight must be 4-D or 5-D, got ", weight.sizes());
  return weight.dim() == 5 ? kConv3d : kConv2d;
}

at::Tensor onednn_conv_weight(const at::Tensor& weight, at::IntArrayRef input_size,
                              at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, int64_t groups, bool bias, bool residual,
                              std::string_view activation, const std::vector<double>& scalars,
                              std::string_view precision) {
  return pack_weight(op_for(weight), weight, input_size, stride, padding, dilation, groups, bias,
                     residual, activation, scalars, precision);
}

at::Tensor& onednn_conv_out(const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                            std::string_view activation, const std::vector<double>& scalars,
                            std::string_view precision, std::string_view out_precision,
                            at::Tensor& out) {
  return run_conv(op_for(weight), input, weight, packed, bias, other, stride, padding, dilation,
                  groups, activation, scalars, precision, out_precision, out);
}

namespace {

// The dispatcher's entry points, one set per op.
template <const ConvOp& Op>
at::Tensor weight_op(const at::Tensor& weight, at::IntArrayRef input_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, bool bias,
                     bool residual, c10::string_view activation, at::ArrayRef<double> scalars,
                     c10::string_view precision) {
  return pack_weight(Op, weight, input_size, stride, padding, dilation, groups, bias, residual,
                     std::string_view(activation), scalars.vec(), std::string_view(precision));
}

template <const ConvOp& Op>
at::Tensor& conv_out_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& packed,
                        const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                        c10::string_view activation, at::ArrayRef<double> scalars,
                        c10::string_view precision, c10::string_view out_precision,
                        at::Tensor& out) {
  return run_conv(Op, input, weight, packed, bias, other, stride, padding, dilation, groups,
                  std::string_view(activation), scalars.vec(), std::string_view(precision),
                  std::string_view(out_precision), out);
}

template <const ConvOp& Op>
at::Tensor conv_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& packed,
                   const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& other,
                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                   int64_t groups, c10::string_view activation, at::ArrayRef<double> scalars,
                   c10::string_view precision, c10::string_view out_precision) {
  // Sized here, so the out= form finds a channels-last output to write into directly. make_spec
  // checks the arguments as the out= form would.
  TORCH_CHECK(input.dim() == Op.rank(), Op.name, ": input must be ", Op.rank(), "-D, got ",
              input.sizes());
  const bool has_bias = bias.has_value() && bias->defined();
  const bool has_other = other.has_value() && other->defined();
  const ConvSpec spec = make_spec(Op, input.sizes(), weight, stride, padding, dilation, groups,
                                  has_bias, has_other, std::string_view(activation), scalars.vec(),
                                  multiplies_in_bf16(precision, Op.name));
  const bool bf16_output =
      multiplies_in_bf16(out_precision, (std::string(Op.name) + " (out_precision)").c_str());
  at::Tensor out =
      at::empty(output_sizes(spec), input.options()
                                        .dtype(bf16_output ? at::kBFloat16 : at::kFloat)
                                        .memory_format(Op.channels_last()));
  return conv_out_op<Op>(input, weight, packed, bias, other, stride, padding, dilation, groups,
                         activation, scalars, precision, out_precision, out);
}

}  // namespace

// The schemas of one op's three entry points, the same for both ranks.
#define KILN_ONEDNN_CONV_SCHEMAS(m, op)                                                          \
  m.def(op                                                                                       \
        "_weight(Tensor weight, int[] input_size, int[] stride, int[] padding, int[] dilation, " \
        "int groups, bool bias, bool residual, str activation, float[] scalars, "                \
        "str precision=\"fp32\") -> Tensor");                                                    \
  m.def(op                                                                                       \
        "(Tensor input, Tensor weight, Tensor packed, Tensor? bias, Tensor? other, "             \
        "int[] stride, int[] padding, int[] dilation, int groups, str activation, "              \
        "float[] scalars, str precision=\"fp32\", str out_precision=\"fp32\") -> Tensor");       \
  m.def(op                                                                                       \
        ".out(Tensor input, Tensor weight, Tensor packed, Tensor? bias, Tensor? other, "         \
        "int[] stride, int[] padding, int[] dilation, int groups, str activation, "              \
        "float[] scalars, str precision=\"fp32\", str out_precision=\"fp32\", *, "               \
        "Tensor(a!) out) -> Tensor(a!)")

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  KILN_ONEDNN_CONV_SCHEMAS(m, "onednn_conv2d");
  KILN_ONEDNN_CONV_SCHEMAS(m, "onednn_conv3d");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("onednn_conv2d_weight", &weight_op<kConv2d>);
  m.impl("onednn_conv2d", &conv_op<kConv2d>);
  m.impl("onednn_conv2d.out", &conv_out_op<kConv2d>);
  m.impl("onednn_conv3d_weight", &weight_op<kConv3d>);
  m.impl("onednn_conv3d", &conv_op<kConv3d>);
  m.impl("onednn_conv3d.out", &conv_out_op<kConv3d>);
}

}  // namespace kiln
