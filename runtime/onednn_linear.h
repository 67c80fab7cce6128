#pragma once

// kiln's own oneDNN linear layers (CPU, float32): the `onednn_linear` pass turns prepack_linear's
// `mkldnn::_linear_pointwise` nodes into these. As for convolutions (runtime/onednn_conv.h), the
// oneDNN matmul primitive is created once per shape and thread count
// (runtime/onednn/matmul_primitive.h), where ATen's op creates one on every call (~20 us); the
// weight is packed at compile time (runtime/onednn_packed.h).
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_linear_weight(Tensor weight, int rows, bool bias) -> Tensor
//   kiln::onednn_linear(Tensor input, Tensor weight, Tensor packed, Tensor? bias) -> Tensor
//                                                                     (and its .out overload)
//
// linear(input, weight, bias) over input's last dim, its other dims flattened into rows.
// Built only with KILN_WITH_ONEDNN.

#include <optional>

#include <ATen/core/Tensor.h>

namespace kiln {

at::Tensor onednn_linear_weight(const at::Tensor& weight, int64_t rows, bool bias);

at::Tensor& onednn_linear_out(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                              at::Tensor& out);

}  // namespace kiln
