#pragma once

// kiln's oneDNN matrix product on dense operands (CPU, float32): what the `prepack_linear` pass
// puts in place of a linear whose weight is not frozen (a training graph's forward, a weight the
// model computes) and of an aten::mm (a training graph's backward), with the bias add and the
// activation after it. As for kiln::onednn_linear (runtime/onednn_linear.h), the oneDNN
// primitive is made once per shape, layout and thread count; nothing is packed: both operands
// are read where they lie, row-major or transposed, so a backward's transposed activations and
// weights cost no copy.
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_matmul(Tensor input, Tensor other, Tensor? bias, bool other_transposed,
//       str activation="none") -> Tensor                              (and its .out overload)
//
// activation(input @ B + bias), where B is `other` ([k, n]) or, with other_transposed, its
// transpose (`other` is then [n, k], a linear layer's weight). input is [..., k]: its other dims
// flattened into rows (a 2-D input may be transposed: strides {1, rows}); the output is
// [..., n], contiguous. An operand in any other layout is copied to row-major first. activation
// is "none", "relu", "gelu", "gelu_tanh", "silu" or "sigmoid" (a oneDNN post-op).
// Built only with KILN_WITH_ONEDNN.

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace kiln {

at::Tensor& onednn_matmul_out(const at::Tensor& input, const at::Tensor& other,
                              const std::optional<at::Tensor>& bias, bool other_transposed,
                              std::string_view activation, at::Tensor& out);

}  // namespace kiln
