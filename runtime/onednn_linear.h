#pragma once

// kiln's own oneDNN linear layers (CPU, float32): the `prepack_linear` pass puts these in place
// of a frozen linear and the activation after it. As for convolutions (runtime/onednn_conv.h), the
// oneDNN matmul primitive is created once per shape and thread count
// (runtime/onednn/matmul_primitive.h), where ATen's op creates one on every call (~20 us); the
// weight is packed at compile time (runtime/onednn_packed.h).
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_linear_weight(Tensor weight, int rows, bool bias, str activation="none",
//       str precision="fp32") -> Tensor
//   kiln::onednn_linear(Tensor input, Tensor weight, Tensor packed, Tensor? bias,
//       str activation="none", str precision="fp32", str out_precision="fp32") -> Tensor
//                                                                      (and its .out overload)
//
// activation(linear(input, weight, bias)) over input's last dim, its other dims flattened into
// rows; activation is "none", "relu", "gelu" (erf), "gelu_tanh", "silu" or "sigmoid", applied by
// oneDNN as a post-op while the product is in registers. precision "bf16" (the compile option
// `precision`) multiplies in bf16 and sums in float32: the weight is packed in bf16, the input
// rounded to bf16 on each call; bias and activation stay float32. Under "bf16" the input may be
// bf16 already (written so by the op before it: passes/bf16_activations.h), read as it is, and
// out_precision "bf16" writes the output in bf16, rounded once after the activation.
// Built only with KILN_WITH_ONEDNN.

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "runtime/onednn/activation.h"

namespace kiln {

/// The activation an op's `activation` argument names; raises (TORCH_CHECK) on any other name.
onednn::Activation linear_activation_named(std::string_view name);
/// `activation` applied by ATen, in place: where a product has no terms (k = 0) and no primitive
/// runs, the output is the activation of the bias.
void apply_linear_activation(at::Tensor& out, onednn::Activation activation);

at::Tensor onednn_linear_weight(const at::Tensor& weight, int64_t rows, bool bias,
                                std::string_view activation = "none",
                                std::string_view precision = "fp32");

at::Tensor& onednn_linear_out(const at::Tensor& input, const at::Tensor& weight,
                              const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                              std::string_view activation, std::string_view precision,
                              std::string_view out_precision, at::Tensor& out);

}  // namespace kiln
