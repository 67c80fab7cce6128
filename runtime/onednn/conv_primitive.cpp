#include "runtime/onednn/conv_primitive.h"

#include <functional>
#include <stdexcept>

#include "runtime/onednn/context.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

/// The first `rank` of `sizes`, as oneDNN takes dimensions.
memory::dims first(const std::array<int64_t, 5>& sizes, int rank) {
  return memory::dims(sizes.begin(), sizes.begin() + rank);
}

/// A channels-last tensor of the spec's rank: NHWC, or NDHWC.
memory::desc channels_last(const ConvSpec& spec, const std::array<int64_t, 5>& sizes,
                           memory::data_type type = memory::data_type::f32) {
  return memory::desc(first(sizes, spec.rank()), type, spec.spatial == 3 ? Tag::ndhwc : Tag::nhwc);
}

/// The type the primitive multiplies in: its source's and its weight's.
memory::data_type product_type(const ConvSpec& spec) {
  return spec.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

/// The dense weight as oneDNN names its dimensions: [K, C, [kd,] kh, kw], or [G, K/G, C/G, [kd,]
/// kh, kw].
memory::desc dense_weight(const ConvSpec& spec) {
  memory::dims dims = first(spec.weight, spec.rank());
  const bool three_d = spec.spatial == 3;
  if (spec.groups == 1)
    return memory::desc(dims, memory::data_type::f32, three_d ? Tag::oidhw : Tag::oihw);
  dims[0] /= spec.groups;
  dims.insert(dims.begin(), spec.groups);
  return memory::desc(dims, memory::data_type::f32, three_d ? Tag::goidhw : Tag::goihw);
}

/// The first `spatial` entries of a stride, padding or dilation.
memory::dims spatial_part(const std::array<int64_t, 3>& values, int spatial, int64_t minus = 0) {
  memory::dims out;
  for (int d = 0; d < spatial; ++d)
    out.push_back(values[d] - minus);
  return out;
}

struct SpecHash {
  size_t operator()(const ConvSpec& s) const {
    uint64_t h = static_cast<uint64_t>(s.spatial);
    for (auto v : s.input)
      h = mix(h, v);
    for (auto v : s.weight)
      h = mix(h, v);
    for (auto v : s.stride)
      h = mix(h, v);
    for (auto v : s.padding)
      h = mix(h, v);
    for (auto v : s.dilation)
      h = mix(h, v);
    h = mix(h, s.groups);
    h = mix(h, (s.bias ? 1 : 0) | (s.residual ? 2 : 0) | (s.bf16 ? 4 : 0) |
                   (s.bf16_output ? 8 : 0) | (s.bf16_residual ? 16 : 0) | (s.accumulate ? 32 : 0) |
                   (static_cast<int>(s.activation) << 6));
    h = mix(h, std::hash<float>()(s.lo));
    h = mix(h, std::hash<float>()(s.hi));
    return mix(h, s.threads);
  }
};

}  // namespace

std::array<int64_t, 5> ConvSpec::output() const {
  std::array<int64_t, 5> out{input[0], weight[0], 0, 0, 0};
  for (int d = 0; d < spatial; ++d) {
    const int64_t extent = dilation[d] * (weight[2 + d] - 1) + 1;
    out[2 + d] = (input[2 + d] + 2 * padding[d] - extent) / stride[d] + 1;
  }
  return out;
}

std::string ConvSpec::problem() const {
  if (spatial != 2 && spatial != 3) return "a convolution is 2-D or 3-D";
  for (int d = 0; d < rank(); ++d) {
    if (input[d] <= 0) return "every input size must be positive";
    if (weight[d] <= 0) return "every weight size must be positive";
  }
  if (groups <= 0 || input[1] != weight[1] * groups || weight[0] % groups != 0)
    return "the weight's channels do not match the input's over " + std::to_string(groups) +
           " groups";
  for (int d = 0; d < spatial; ++d) {
    if (stride[d] <= 0 || dilation[d] <= 0 || padding[d] < 0)
      return "strides and dilations must be positive, paddings not negative";
  }
  const auto out = output();
  for (int d = 2; d < rank(); ++d)
    if (out[d] <= 0) return "the output would be empty";
  if (threads <= 0) return "the thread count must be positive";
  if ((bf16_output || bf16_residual) && !bf16)
    return "only a convolution that multiplies in bf16 writes or adds bf16";
  if (bf16_residual && !residual) return "a bf16 residual needs a residual";
  if (accumulate && (!residual || bf16_residual != bf16_output))
    return "accumulating into the output needs a residual of the output's type";
  return "";
}

struct ConvPrimitive::State {
  ConvSpec spec;
  dnnl::convolution_forward::primitive_desc descriptor;
  dnnl::convolution_forward primitive;
  memory::desc source, weights, bias, destination, residual, scratchpad;
  uint64_t weight_layout = 0;  // layout_of(weights), asked on every run
  // The reorders into `source` from a dense NCHW input and (for bf16) from a float32 NHWC one,
  // made on the first such call.
  mutable std::once_flag nchw_once, nhwc_once;
  mutable memory::desc nchw, nhwc_f32;
  mutable dnnl::reorder from_nchw, from_nhwc_f32;
};

ConvPrimitive::ConvPrimitive(std::unique_ptr<State> state) : state_(std::move(state)) {}
ConvPrimitive::~ConvPrimitive() = default;

std::shared_ptr<const ConvPrimitive> ConvPrimitive::get(const ConvSpec& spec) {
  static PrimitiveCache<ConvSpec, ConvPrimitive, SpecHash> cache;
  if (auto found = cache.find(spec)) return found;
  if (std::string problem = spec.problem(); !problem.empty()) {
    throw std::invalid_argument("oneDNN convolution: " + problem);
  }
  auto state = std::make_unique<State>();
  state->spec = spec;
  state->source = channels_last(spec, spec.input, product_type(spec));
  state->destination = channels_last(
      spec, spec.output(), spec.bf16_output ? memory::data_type::bf16 : memory::data_type::f32);
  state->residual = channels_last(
      spec, spec.output(), spec.bf16_residual ? memory::data_type::bf16 : memory::data_type::f32);
  state->bias = memory::desc({spec.weight[0]}, memory::data_type::f32, Tag::x);
  memory::desc any_weights = dense_weight(spec);
  any_weights = memory::desc(any_weights.get_dims(), product_type(spec), Tag::any);

  dnnl::post_ops post_ops;
  if (spec.accumulate) {
    post_ops.append_sum(1.0f);
  } else if (spec.residual) {
    post_ops.append_binary(dnnl::algorithm::binary_add, state->residual);
  }
  append_activation(post_ops, spec.activation, spec.lo, spec.hi);
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // oneDNN's dilation counts the gaps: 0 is a dense kernel.
  const memory::dims dilation = spatial_part(spec.dilation, spec.spatial, 1);
  const memory::dims stride = spatial_part(spec.stride, spec.spatial);
  const memory::dims padding = spatial_part(spec.padding, spec.spatial);
  try {
    if (spec.bias) {
      state->descriptor = dnnl::convolution_forward::primitive_desc(
          cpu_engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          state->source, any_weights, state->bias, state->destination, stride, dilation, padding,
          padding, attr);
    } else {
      state->descriptor = dnnl::convolution_forward::primitive_desc(
          cpu_engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          state->source, any_weights, state->destination, stride, dilation, padding, padding, attr);
    }
    state->primitive = dnnl::convolution_forward(state->descriptor);
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN has no convolution for this case: ") + e.what());
  }
  state->weights = state->descriptor.weights_desc();
  state->scratchpad = state->descriptor.scratchpad_desc();
  state->weight_layout = layout_of(state->weights);
  return cache.keep(spec,
                    std::shared_ptr<const ConvPrimitive>(new ConvPrimitive(std::move(state))));
}

size_t ConvPrimitive::packed_weight_bytes() const {
  return state_->weights.get_size();
}

uint64_t ConvPrimitive::packed_weight_layout() const {
  return state_->weight_layout;
}

void ConvPrimitive::pack_weight(const float* dense, void* packed) const {
  reorder(dense_weight(state_->spec), dense, state_->weights, packed);
}

void ConvPrimitive::run(const void* input, const void* packed_weight, const float* bias,
                        const void* residual, void* output, Source kind) const {
  const State& s = *state_;
  if (kind == Source::NhwcBf16 && !s.spec.bf16)
    throw std::invalid_argument("oneDNN convolution: a bf16 input needs a bf16 convolution");
  const bool input_nchw = kind == Source::Nchw;
  const void* source = input;
  if (input_nchw || (s.spec.bf16 && kind == Source::Nhwc)) {
    // One reorder converts the layout (a dense NCHW image) and the type (bf16) at once.
    memory::desc& from = input_nchw ? state_->nchw : state_->nhwc_f32;
    dnnl::reorder& convert = input_nchw ? state_->from_nchw : state_->from_nhwc_f32;
    std::call_once(input_nchw ? state_->nchw_once : state_->nhwc_once, [&] {
      const dnnl::engine& engine = cpu_engine();
      from = input_nchw ? memory::desc(first(s.spec.input, s.spec.rank()), memory::data_type::f32,
                                       s.spec.spatial == 3 ? Tag::ncdhw : Tag::nchw)
                        : channels_last(s.spec, s.spec.input);
      convert = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, s.source));
    });
    void* converted = staging(s.source.get_size());
    const Argument reorder_args[] = {{DNNL_ARG_FROM, &from, input},
                                     {DNNL_ARG_TO, &s.source, converted}};
    execute(convert, memory::desc(), reorder_args);
    source = converted;
  }
  Argument args[5] = {{DNNL_ARG_SRC, &s.source, source},
                      {DNNL_ARG_WEIGHTS, &s.weights, packed_weight},
                      {DNNL_ARG_DST, &s.destination, output}};
  size_t count = 3;
  if (s.spec.bias) args[count++] = {DNNL_ARG_BIAS, &s.bias, bias};
  if (s.spec.accumulate && residual != output)
    throw std::invalid_argument(
        "oneDNN convolution: accumulating needs the residual in the output");
  if (s.spec.residual && !s.spec.accumulate) {
    args[count++] = {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, &s.residual, residual};
  }
  execute(s.primitive, s.scratchpad, std::span<const Argument>(args, count));
}

std::string ConvPrimitive::implementation() const {
  return state_->descriptor.impl_info_str();
}

}  // namespace kiln::onednn
