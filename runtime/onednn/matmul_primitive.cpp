#include "runtime/onednn/matmul_primitive.h"

#include <stdexcept>

#include "runtime/onednn/context.h"

namespace kiln::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct SpecHash {
  size_t operator()(const MatmulSpec& s) const {
    const uint64_t flags = (s.bias ? 1 : 0) | (s.bf16 ? 2 : 0) | (s.source_transposed ? 4 : 0) |
                           (s.bf16_output ? 8 : 0) | (static_cast<uint64_t>(s.weights) << 4) |
                           (static_cast<uint64_t>(s.activation) << 6);
    return mix(mix(mix(mix(mix(0, s.rows), s.k), s.n), flags), s.threads);
  }
};

/// w[n, k] row-major, as the [k, n] matrix the product reads.
memory::desc dense_weight(const MatmulSpec& spec) {
  return memory::desc({spec.k, spec.n}, memory::data_type::f32, Tag::ba);
}

}  // namespace

std::string MatmulSpec::problem() const {
  if (rows <= 0 || k <= 0 || n <= 0) return "every size must be positive";
  if (threads <= 0) return "the thread count must be positive";
  if (activation == Activation::Clip) return "a linear layer takes no clip";
  if (bf16 && (weights != OperandLayout::Packed || source_transposed)) {
    return "bf16 takes a packed weight and a row-major input";
  }
  if (bf16_output && !bf16) return "a bf16 output needs bf16 products";
  return "";
}

struct MatmulPrimitive::State {
  MatmulSpec spec;
  dnnl::matmul::primitive_desc descriptor;
  dnnl::matmul primitive;
  memory::desc source, weights, bias, destination, scratchpad;
  uint64_t weight_layout = 0;  // layout_of(weights), asked on every run
  memory::desc source_f32;     // bf16 only: the input as given
  dnnl::reorder to_source;     // bf16 only: converts it
};

MatmulPrimitive::MatmulPrimitive(std::unique_ptr<State> state) : state_(std::move(state)) {}
MatmulPrimitive::~MatmulPrimitive() = default;

std::shared_ptr<const MatmulPrimitive> MatmulPrimitive::get(const MatmulSpec& spec) {
  static PrimitiveCache<MatmulSpec, MatmulPrimitive, SpecHash> cache;
  if (auto found = cache.find(spec)) return found;
  if (std::string problem = spec.problem(); !problem.empty()) {
    throw std::invalid_argument("oneDNN matmul: " + problem);
  }
  auto state = std::make_unique<State>();
  state->spec = spec;
  const memory::data_type product = spec.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  state->source =
      memory::desc({spec.rows, spec.k}, product, spec.source_transposed ? Tag::ba : Tag::ab);
  state->destination =
      memory::desc({spec.rows, spec.n},
                   spec.bf16_output ? memory::data_type::bf16 : memory::data_type::f32, Tag::ab);
  state->bias = memory::desc({1, spec.n}, memory::data_type::f32, Tag::ab);
  const Tag weight_tag = spec.weights == OperandLayout::Packed     ? Tag::any
                         : spec.weights == OperandLayout::RowMajor ? Tag::ab
                                                                   : Tag::ba;
  dnnl::post_ops post_ops;
  append_activation(post_ops, spec.activation, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto describe = [&](Tag tag) {
    const memory::desc weights({spec.k, spec.n}, product, tag);
    return spec.bias ? dnnl::matmul::primitive_desc(cpu_engine(), state->source, weights,
                                                    state->bias, state->destination, attr)
                     : dnnl::matmul::primitive_desc(cpu_engine(), state->source, weights,
                                                    state->destination, attr);
  };
  try {
    state->descriptor = describe(weight_tag);
    // A weight left to oneDNN that it takes unblocked (no blocked matmul for this CPU: its jit
    // gemm, without AVX-512) comes out k-major, [k, n] row-major, which its gemm read up to 2.7x
    // slower than the [n, k] layout a linear layer's weight has (BERT's 768 -> 3072 on AVX2):
    // packed, it is kept in that layout.
    if (spec.weights == OperandLayout::Packed && !spec.bf16 &&
        state->descriptor.weights_desc().get_inner_nblks() == 0) {
      state->descriptor = describe(Tag::ba);
    }
    state->primitive = dnnl::matmul(state->descriptor);
    if (spec.bf16) {
      state->source_f32 = memory::desc({spec.rows, spec.k}, memory::data_type::f32, Tag::ab);
      state->to_source = dnnl::reorder(dnnl::reorder::primitive_desc(
          cpu_engine(), state->source_f32, cpu_engine(), state->source));
    }
  } catch (const dnnl::error& e) {
    throw std::runtime_error(std::string("oneDNN has no matmul for this case: ") + e.what());
  }
  state->weights = state->descriptor.weights_desc();
  state->scratchpad = state->descriptor.scratchpad_desc();
  state->weight_layout = layout_of(state->weights);
  return cache.keep(spec,
                    std::shared_ptr<const MatmulPrimitive>(new MatmulPrimitive(std::move(state))));
}

size_t MatmulPrimitive::packed_weight_bytes() const {
  return state_->weights.get_size();
}

uint64_t MatmulPrimitive::packed_weight_layout() const {
  return state_->weight_layout;
}

void MatmulPrimitive::pack_weight(const float* dense, void* packed) const {
  reorder(dense_weight(state_->spec), dense, state_->weights, packed);
}

void MatmulPrimitive::run(const void* input, const void* packed_weight, const float* bias,
                          void* output, bool bf16_input) const {
  const State& s = *state_;
  if (bf16_input && !s.spec.bf16)
    throw std::invalid_argument("oneDNN matmul: a bf16 input needs a bf16 primitive");
  const void* source = input;
  if (s.spec.bf16 && !bf16_input) {
    void* converted = staging(s.source.get_size());
    const Argument reorder_args[] = {{DNNL_ARG_FROM, &s.source_f32, input},
                                     {DNNL_ARG_TO, &s.source, converted}};
    execute(s.to_source, memory::desc(), reorder_args);
    source = converted;
  }
  Argument args[4] = {{DNNL_ARG_SRC, &s.source, source},
                      {DNNL_ARG_WEIGHTS, &s.weights, packed_weight},
                      {DNNL_ARG_DST, &s.destination, output}};
  const size_t count = s.spec.bias ? 4 : 3;
  if (s.spec.bias) args[3] = {DNNL_ARG_BIAS, &s.bias, bias};
  execute(s.primitive, s.scratchpad, std::span<const Argument>(args, count));
}

std::string MatmulPrimitive::implementation() const {
  return state_->descriptor.impl_info_str();
}

}  // namespace kiln::onednn
