#pragma once

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace kiln {

/// 3x3, stride 1, padding 1 convolutions by Winograd's F(4x4, 3x3) algorithm: each 6x6 input tile
/// and each filter are transformed so that a 4x4 output tile takes 36 multiplies per channel pair
/// instead of 144, done as 36 GEMMs of [tiles, C] x [C, K] (ATen's bmm). The `winograd_conv`
/// pass picks it for frozen float32 channels-last convolutions where it is measured to win.
///
/// Float32 rounding: the transforms scale values by up to 8 and cancel, so results differ from a
/// direct convolution by about 1e-5 of the largest output (measured: ~2e-6 relative in norm,
/// at most 1e-5 of the largest output, for 64 to 512 channels), against ~2e-7 for oneDNN's
/// direct convolution. An input with a NaN or an infinity anywhere is convolved directly
/// (ATen's conv2d, with the dense `weight`): the transforms would spread it over whole tiles.
///
/// Registered with ATen's dispatcher as (CPU):
///   kiln::winograd_weight(Tensor weight) -> Tensor
///   kiln::winograd_conv2d(Tensor input, Tensor weight, Tensor transformed, Tensor? bias,
///                         Tensor? other, str activation) -> Tensor     (and its .out overload)

/// The filter transform G g G^T of a [K, C, 3, 3] float32 weight: [36, C, K], computed in
/// float64. Done once, at compile time (constant folding).
at::Tensor winograd_weight(const at::Tensor& weight);

/// relu(conv2d(input, weight, bias, padding=1) + other) with the relu if `activation` is "relu"
/// ("none": no activation) and the add if `other` is given. `input` is [N, C, H, W] float32,
/// `weight` the [K, C, 3, 3] filter and `transformed` winograd_weight(weight); the result is
/// channels-last.
at::Tensor winograd_conv2d(const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& transformed, const std::optional<at::Tensor>& bias,
                           const std::optional<at::Tensor>& other, std::string_view activation);

/// The same into `out` ([N, K, H, W] float32; written directly when channels-last).
at::Tensor& winograd_conv2d_out(const at::Tensor& input, const at::Tensor& weight,
                                const at::Tensor& transformed,
                                const std::optional<at::Tensor>& bias,
                                const std::optional<at::Tensor>& other, std::string_view activation,
                                at::Tensor& out);

}  // namespace kiln
