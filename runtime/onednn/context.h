#pragma once

// What kiln's oneDNN primitives share (runtime/onednn/*_primitive.h): the CPU engine, each
// thread's stream and scratchpad, and the identity of a weight layout. Included only by files
// under runtime/onednn/, which see oneDNN's headers before the torch wheel's (cmake/OneDNN.cmake).

#include <cstdint>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/onednn/activation.h"

namespace kiln::onednn {

const dnnl::engine& cpu_engine();

/// Runs `primitive` on this thread's stream with `args`, giving it this thread's scratchpad
/// (primitives are made with a user scratchpad, so one primitive runs on several threads at
/// once), and waits for it.
void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory>& args);

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

/// Mixes `value` into a hash.
uint64_t mix(uint64_t seed, uint64_t value);

}  // namespace kiln::onednn
