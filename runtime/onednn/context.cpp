#include "runtime/onednn/context.h"

#include "runtime/onednn_support.h"

#include <cstdlib>
#include <new>
#include <unordered_map>
#include <vector>

namespace kiln::onednn {
namespace {

/// A 64-byte aligned buffer that grows to the largest size asked of it.
class Buffer {
 public:
  ~Buffer() { std::free(data_); }

  void* at_least(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      data_ = nullptr;
      size_ = 0;
      const size_t rounded = (bytes + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, rounded);
      if (!data_) throw std::bad_alloc();
      size_ = rounded;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

/// One primitive's arguments as bound on one thread: the memory objects and the C argument list
/// that points at them. It holds the primitive, so its address (the key) is never reused by
/// another primitive while the binding lives.
struct Binding {
  dnnl::primitive primitive;
  std::vector<dnnl::memory> memories;
  std::vector<const void*> pointers;
  std::vector<dnnl_exec_arg_t> args;

  /// Re-points the bound memory objects; false when `arguments` are not the ones bound.
  bool rebind(std::span<const Argument> arguments) {
    if (arguments.size() != args.size()) return false;
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (args[i].arg != arguments[i].index) return false;
    }
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (pointers[i] == arguments[i].data) continue;
      memories[i].set_data_handle(const_cast<void*>(arguments[i].data));
      pointers[i] = arguments[i].data;
    }
    return true;
  }

  void bind(std::span<const Argument> arguments) {
    memories.clear();
    pointers.clear();
    args.clear();
    for (const Argument& argument : arguments) {
      memories.emplace_back(*argument.desc, cpu_engine(), const_cast<void*>(argument.data));
      pointers.push_back(argument.data);
    }
    for (size_t i = 0; i < arguments.size(); ++i)
      args.push_back({arguments[i].index, memories[i].get()});
  }
};

struct ThreadContext {
  dnnl::stream stream{cpu_engine()};
  Buffer scratchpad, staging;
  std::unordered_map<dnnl_primitive_t, Binding> bindings;
  std::vector<Argument> arguments;  // a run's arguments with the scratchpad added
};

ThreadContext& thread_context() {
  thread_local ThreadContext context;
  return context;
}

}  // namespace

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::span<const Argument> arguments) {
  ThreadContext& context = thread_context();
  if (const size_t bytes = scratchpad.get_size(); bytes > 0) {
    context.arguments.assign(arguments.begin(), arguments.end());
    context.arguments.push_back(
        {DNNL_ARG_SCRATCHPAD, &scratchpad, context.scratchpad.at_least(bytes)});
    arguments = context.arguments;
  }
  Binding& binding = context.bindings[primitive.get()];
  if (!binding.primitive) binding.primitive = primitive;
  if (!binding.rebind(arguments)) binding.bind(arguments);
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(primitive.get(), context.stream.get(),
                             static_cast<int>(binding.args.size()), binding.args.data()),
      "could not execute a primitive");
  context.stream.wait();
}

void* staging(size_t bytes) {
  return thread_context().staging.at_least(bytes);
}

void reorder(const dnnl::memory::desc& from_desc, const void* from,
             const dnnl::memory::desc& to_desc, void* to) {
  const dnnl::engine& engine = cpu_engine();
  dnnl::memory source(from_desc, engine, const_cast<void*>(from));
  dnnl::memory target(to_desc, engine, to);
  dnnl::stream& stream = thread_context().stream;
  dnnl::reorder(source, target).execute(stream, source, target);
  stream.wait();
}

void append_activation(dnnl::post_ops& post_ops, Activation activation, float lo, float hi) {
  using dnnl::algorithm;
  switch (activation) {
    case Activation::None:
      return;
    case Activation::Relu:
      return post_ops.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
    case Activation::Clip:
      return post_ops.append_eltwise(algorithm::eltwise_clip, lo, hi);
    case Activation::Silu:
      return post_ops.append_eltwise(algorithm::eltwise_swish, 1.f, 0.f);
    case Activation::Sigmoid:
      return post_ops.append_eltwise(algorithm::eltwise_logistic, 0.f, 0.f);
    case Activation::Hardswish:
      return post_ops.append_eltwise(algorithm::eltwise_hardswish, 1.f / 6, 0.5f);
    case Activation::Hardsigmoid:
      return post_ops.append_eltwise(algorithm::eltwise_hardsigmoid, 1.f / 6, 0.5f);
    case Activation::Gelu:
      return post_ops.append_eltwise(algorithm::eltwise_gelu_erf, 0.f, 0.f);
    case Activation::GeluTanh:
      return post_ops.append_eltwise(algorithm::eltwise_gelu_tanh, 0.f, 0.f);
  }
}

uint64_t mix(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

uint64_t layout_of(const dnnl::memory::desc& desc) {
  using dnnl::memory;
  uint64_t h = mix(0, static_cast<uint64_t>(desc.get_format_kind()));
  h = mix(h, static_cast<uint64_t>(desc.get_data_type()));
  h = mix(h, desc.get_size());
  for (auto d : desc.get_dims())
    h = mix(h, d);
  if (desc.get_format_kind() != memory::format_kind::blocked) return h;
  for (auto s : desc.get_strides())
    h = mix(h, s);
  h = mix(h, desc.get_inner_nblks());
  for (auto b : desc.get_inner_blks())
    h = mix(h, b);
  for (auto i : desc.get_inner_idxs())
    h = mix(h, i);
  return h;
}

}  // namespace kiln::onednn

namespace kiln {

bool onednn_native_bf16() {
  // oneDNN's ISAs are bit sets: each one that multiplies bf16 (AVX512-BF16, then AMX) holds all
  // of avx512_core_bf16's bits.
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
}

}  // namespace kiln
