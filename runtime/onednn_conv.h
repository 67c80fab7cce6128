#pragma once

// kiln's own oneDNN convolutions (CPU, float32 or bf16, channels-last): the `onednn_conv` pass
// turns prepack_conv's `mkldnn::_convolution_pointwise` nodes into these. 2-D (NHWC) and 3-D
// (NDHWC) convolutions have an op each, with the same arguments: kiln::onednn_conv3d and
// kiln::onednn_conv3d_weight are the ops below for 5-D inputs and weights, three values per
// stride, padding and dilation, and an NCDHW clip where an NCHW image is taken. The primitive is
// created once per shape and thread count (runtime/onednn/conv_primitive.h) instead of on every
// call, as ATen's op does; the weight is packed at compile time, into the layout that primitive
// reads.
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_conv2d_weight(Tensor weight, int[] input_size, int[] stride, int[] padding,
//       int[] dilation, int groups, bool bias, bool residual, str activation, float[] scalars,
//       str precision="fp32") -> Tensor
//   kiln::onednn_conv2d(Tensor input, Tensor weight, Tensor packed, Tensor? bias, Tensor? other,
//       int[] stride, int[] padding, int[] dilation, int groups, str activation,
//       float[] scalars, str precision="fp32", str out_precision="fp32") -> Tensor
//                                                                   (and its .out overload)
//
// activation(conv2d(input, weight, bias) + other): `activation` is "none", "relu", "hardtanh"
// (scalars = [min, max]), "silu", "sigmoid", "hardswish" or "hardsigmoid". `packed` is
// onednn_conv2d_weight(weight, ...) for the same sizes and settings: a float32 vector holding a
// 64-byte header (the layout's identity) and the weight in oneDNN's blocked layout. Where the
// thread count at run time differs from the one the weight was packed for and oneDNN's layout with
// it, the dense `weight` is packed again on every call (slower, same results). precision "bf16"
// (the compile option `precision`) multiplies in bf16 and sums in float32: the weight is packed in
// bf16, a float32 input rounded to bf16 on each call (a bf16 input, as another such convolution
// wrote it, is read as it is); bias and activation stay float32, and so do `other` and the output
// unless they are bf16: a bf16 `other` is added as it is, and out_precision "bf16" writes the
// output in bf16, rounded once after the activation (both for a bf16 convolution only: the
// activations between convolutions that multiply in bf16 anyway, as the `bf16_activations` pass
// chooses them). Built only with
// KILN_WITH_ONEDNN (cmake/OneDNN.cmake); without it the ops are not registered and prepack_conv's
// convolutions stay ATen's.

#include <optional>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

namespace kiln {

/// The ops' C++ entry points, for either rank: a 4-D weight is kiln::onednn_conv2d's, a 5-D one
/// kiln::onednn_conv3d's (the input, strides, paddings and dilations must then match it).
at::Tensor onednn_conv_weight(const at::Tensor& weight, at::IntArrayRef input_size,
                              at::IntArrayRef stride, at::IntArrayRef padding,
                              at::IntArrayRef dilation, int64_t groups, bool bias, bool residual,
                              std::string_view activation, const std::vector<double>& scalars,
                              std::string_view precision = "fp32");

at::Tensor& onednn_conv_out(const at::Tensor& input, const at::Tensor& weight,
                            const at::Tensor& packed, const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& other, at::IntArrayRef stride,
                            at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                            std::string_view activation, const std::vector<double>& scalars,
                            std::string_view precision, std::string_view out_precision,
                            at::Tensor& out);

}  // namespace kiln
