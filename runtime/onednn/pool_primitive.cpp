#include "runtime/onednn/pool_primitive.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "runtime/onednn/context.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;

struct SpecHash {
  size_t operator()(const PoolSpec& s) const {
    uint64_t h = 0;
    for (auto v : s.input)
      h = mix(h, v);
    for (const auto& pair : {s.kernel, s.stride, s.padding, s.dilation}) {
      h = mix(h, pair[0]);
      h = mix(h, pair[1]);
    }
    h = mix(h, (s.ceil_mode ? 1 : 0) | (s.bf16 ? 2 : 0) | (s.nchw ? 4 : 0) | (s.average ? 8 : 0) |
                   (s.include_padding ? 16 : 0));
    return mix(h, s.threads);
  }
};

/// PyTorch's pooling output size along one dimension (pooling_output_shape in ATen).
int64_t pooled_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                    bool ceil_mode) {
  const int64_t span = size + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = span / stride + 1;
  // A last window that would start in the right padding is dropped.
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

}  // namespace

std::array<int64_t, 4> PoolSpec::output() const {
  std::array<int64_t, 4> out{input[0], input[1], 0, 0};
  for (int d = 0; d < 2; ++d)
    out[2 + d] =
        pooled_size(input[2 + d], kernel[d], stride[d], padding[d], dilation[d], ceil_mode);
  return out;
}

std::array<int64_t, 2> PoolSpec::right_padding() const {
  const auto out = output();
  std::array<int64_t, 2> right{};
  for (int d = 0; d < 2; ++d) {
    const int64_t extent = dilation[d] * (kernel[d] - 1) + 1;
    right[d] =
        std::max<int64_t>(0, (out[2 + d] - 1) * stride[d] + extent - input[2 + d] - padding[d]);
  }
  return right;
}

bool PoolSpec::divides_as_pytorch() const {
  if (!average || !include_padding) return true;
  const auto right = right_padding();
  return right[0] <= padding[0] && right[1] <= padding[1];
}

std::string PoolSpec::problem() const {
  for (auto v : input)
    if (v <= 0) return "every input size must be positive";
  for (int d = 0; d < 2; ++d) {
    if (kernel[d] <= 0 || stride[d] <= 0 || dilation[d] <= 0)
      return "kernel sizes, strides and dilations must be positive";
    if (padding[d] < 0 || padding[d] > (dilation[d] * (kernel[d] - 1) + 1) / 2)
      return "padding must be at least 0 and at most half the effective kernel size";
  }
  const auto out = output();
  if (out[2] <= 0 || out[3] <= 0) return "the output would be empty";
  if (threads <= 0) return "the thread count must be positive";
  if (average && (dilation[0] != 1 || dilation[1] != 1)) return "an average pool has no dilation";
  return "";
}

struct PoolPrimitive::State {
  PoolSpec spec;
  dnnl::pooling_forward::primitive_desc descriptor;
  dnnl::pooling_forward primitive;
  memory::desc source, destination, scratchpad;
};

PoolPrimitive::PoolPrimitive(std::unique_ptr<State> state) : state_(std::move(state)) {}
PoolPrimitive::~PoolPrimitive() = default;

std::shared_ptr<const PoolPrimitive> PoolPrimitive::get(const PoolSpec& spec) {
  static PrimitiveCache<PoolSpec, PoolPrimitive, SpecHash> cache;
  if (auto found = cache.find(spec)) return found;
  const char* what = spec.average ? "oneDNN average pool: " : "oneDNN max pool: ";
  if (std::string problem = spec.problem(); !problem.empty())
    throw std::invalid_argument(what + problem);
  const auto type = spec.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const auto tag = spec.nchw ? memory::format_tag::nchw : memory::format_tag::nhwc;
  const auto out = spec.output();
  auto state = std::make_unique<State>();
  state->spec = spec;
  state->source = memory::desc(memory::dims(spec.input.begin(), spec.input.end()), type, tag);
  state->destination = memory::desc(memory::dims(out.begin(), out.end()), type, tag);
  // oneDNN's right padding is whatever the last window needs: ceil_mode's extra window reads
  // past the input, which a max pool skips as PyTorch does, and an average without the padding
  // does not count. Its dilation counts the gaps.
  const auto right_pad = spec.right_padding();
  const memory::dims right(right_pad.begin(), right_pad.end());
  const auto algorithm = !spec.average          ? dnnl::algorithm::pooling_max
                         : spec.include_padding ? dnnl::algorithm::pooling_avg_include_padding
                                                : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    state->descriptor = dnnl::pooling_forward::primitive_desc(
        cpu_engine(), dnnl::prop_kind::forward_inference, algorithm, state->source,
        state->destination, {spec.stride[0], spec.stride[1]}, {spec.kernel[0], spec.kernel[1]},
        {spec.dilation[0] - 1, spec.dilation[1] - 1}, {spec.padding[0], spec.padding[1]}, right,
        attr);
    state->primitive = dnnl::pooling_forward(state->descriptor);
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string(what) + "no implementation for this case: " + e.what());
  }
  state->scratchpad = state->descriptor.scratchpad_desc();
  return cache.keep(spec,
                    std::shared_ptr<const PoolPrimitive>(new PoolPrimitive(std::move(state))));
}

std::shared_ptr<const PoolPrimitive> PoolPrimitive::find(const PoolSpec& spec) {
  static std::mutex mutex;
  static std::unordered_set<PoolSpec, SpecHash> unimplemented;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (unimplemented.contains(spec)) return nullptr;
  }
  try {
    return get(spec);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::runtime_error&) {
    std::lock_guard<std::mutex> lock(mutex);
    unimplemented.insert(spec);
    return nullptr;
  }
}

void PoolPrimitive::run(const void* input, void* output) const {
  const State& s = *state_;
  const Argument args[] = {{DNNL_ARG_SRC, &s.source, input},
                           {DNNL_ARG_DST, &s.destination, output}};
  execute(s.primitive, s.scratchpad, args);
}

std::string PoolPrimitive::implementation() const {
  return state_->descriptor.impl_info_str();
}

}  // namespace kiln::onednn
