#pragma once

// Constants the passes fold (a batch norm folded into a convolution's weight, a weight packed
// for oneDNN, Winograd's transformed filters) come out as the same bytes in every compile of one
// model: each specialization of a region, each graph dynamo makes of it (static sizes, then
// symbolic ones), each binding a shape class compiles at. Kept per compile, they would be a copy
// of the weights each (about 100 MB a compile for ResNet-18). A compile hands each folded
// constant to `share_folded_constant`, which returns the tensor an earlier compile folded to the
// same bytes while one still holds it.

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>

namespace kiln {

/// Smaller constants are kept as they are: sharing them saves little, and comparing costs.
inline constexpr size_t kMinSharedConstantBytes = 64 << 10;

/// `folded` (computed at compile time from `inputs`), or a tensor still alive from an earlier
/// call with the same dtype, sizes, strides and bytes. Only CPU tensors of at least
/// kMinSharedConstantBytes that alone hold their whole storage take part, and no result that is
/// one of its inputs (`contiguous()` of a contiguous weight returns the weight): a caller's
/// weight, which its owner may change, is never kept nor handed out. Shared tensors must never
/// be written: plans read their constants only.
at::Tensor share_folded_constant(at::Tensor folded, c10::ArrayRef<at::Tensor> inputs = {});

/// Bytes of the constants this process took from an earlier compile instead of keeping them
/// again, since it began (kiln::stats() reports them since its last reset).
int64_t shared_constant_bytes();

}  // namespace kiln
