// Input signatures: what a specialization is keyed by. For a tensor: dtype, device, sizes,
// strides and requires_grad; for anything else: its kind. Grad mode is part of every key, since
// it decides whether outputs may be written into planned buffers, and so are the CPU and CUDA
// autocast states (a specialization folds `torch.is_autocast_enabled()`).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// Inline room for a few small tensors: a key is built on every call, and a heap allocation
/// (with its growth steps) costs a noticeable share of a small model's call.
using SignatureKey = c10::SmallVector<int64_t, 32>;

struct SignatureHash {
  size_t operator()(const SignatureKey& key) const;
};

SignatureKey signature_of(const std::vector<c10::IValue>& inputs);
/// What the key holds of an input that is not a tensor: its kind (None, int, float, ...); -1
/// for a tensor.
int64_t kind_of(const c10::IValue& input);
SignatureKey signature_of(const std::vector<at::Tensor>& inputs);

/// "f32[2,3], i64[8]{1}" for logs and errors.
std::string describe_inputs(const std::vector<c10::IValue>& inputs);

}  // namespace kiln
