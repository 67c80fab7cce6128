#pragma once

// What kiln's oneDNN primitives share (runtime/onednn/*_primitive.h): the CPU engine, each
// thread's stream and scratchpad, and the identity of a weight layout. Included only by files
// under runtime/onednn/, which see oneDNN's headers before the torch wheel's (cmake/OneDNN.cmake).

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/onednn/activation.h"

namespace kiln::onednn {

const dnnl::engine& cpu_engine();

/// One argument of one run: oneDNN's argument index, the layout the primitive was made for, and
/// where the data is this time.
struct Argument {
  int index;
  const dnnl::memory::desc* desc;
  const void* data;
};

/// Runs `primitive` on this thread's stream with `arguments`, giving it this thread's scratchpad
/// of `scratchpad.get_size()` bytes (primitives are made with a user scratchpad, so one primitive
/// runs on several threads at once), and waits for it. The memory objects a primitive's arguments
/// need are made on its first run on a thread and only re-pointed on later runs: making them on
/// every call cost more than oneDNN's execution of a small convolution.
void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::span<const Argument> arguments);

/// This thread's staging buffer of at least `bytes` (64-byte aligned), for an input converted
/// before a primitive reads it; valid until this thread's next call.
void* staging(size_t bytes);

/// Copies `from` (laid out as `from_desc`) into `to` (laid out as `to_desc`).
void reorder(const dnnl::memory::desc& from_desc, const void* from,
             const dnnl::memory::desc& to_desc, void* to);

/// A layout's identity (sizes, strides, blocking): two primitives read each other's packed
/// weights where it is equal.
uint64_t layout_of(const dnnl::memory::desc& desc);

/// Appends `activation` to `post_ops` (nothing for None); lo and hi are Clip's bounds.
void append_activation(dnnl::post_ops& post_ops, Activation activation, float lo, float hi);

/// The primitives made so far, one per spec, kept for the life of the process (making one costs
/// 20-350 us). Thread-safe; two threads that made the same primitive at once both get the one kept
/// first.
template <class Spec, class Primitive, class Hash>
class PrimitiveCache {
 public:
  std::shared_ptr<const Primitive> find(const Spec& spec) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = made_.find(spec);
    return it == made_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const Primitive> keep(const Spec& spec, std::shared_ptr<const Primitive> made) {
    std::lock_guard<std::mutex> lock(mutex_);
    return made_.emplace(spec, std::move(made)).first->second;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<Spec, std::shared_ptr<const Primitive>, Hash> made_;
};

/// Mixes `value` into a hash.
uint64_t mix(uint64_t seed, uint64_t value);

}  // namespace kiln::onednn
