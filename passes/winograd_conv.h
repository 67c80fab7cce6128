// Winograd convolutions (CPU, float32, channels-last): a oneDNN convolution that prepack_conv
// made, with a 3x3 filter at stride 1, padding 1, no dilation and no groups, runs as
// kiln::winograd_conv2d (runtime/winograd_conv.h), F(4x4, 3x3): 36 multiplies per 4x4 output
// tile and channel pair instead of 144, with the bias, a residual add and a relu in its output
// transform. The filter is transformed once, at compile time:
//
//   %w_mkldnn = aten::to_mkldnn(%w) {dtype=None}
//   %w_packed = aten::mkldnn_reorder_conv2d_weight(%w_mkldnn) {..., input_size=[1,64,56,56]}
//   %r = mkldnn::_convolution_pointwise(%x, %w_packed, %b) {padding=[1,1], stride=[1,1],
//                                        dilation=[1,1], groups=1, attr="relu", ...}
// becomes
//   %w_winograd : f32[36,64,64] = kiln::winograd_weight(%w)                          (folded)
//   %r = kiln::winograd_conv2d(%x, %w, %w_winograd, %b) {other=None, activation="relu"}
//
// (`_convolution_pointwise.binary`'s residual operand becomes `other`). Only where it wins, as
// measured on ResNet-18's layers and narrower ones here (2 Zen 4 cores, 32 MB L3): at least 64
// input and output channels, the transformed filter (36 x C x K floats) within 4 MB, or within
// 16 MB over at least 64 tiles of 4x4 outputs, and the call's transformed tiles (36 x tiles x
// (C + K) floats) within 16 MB, 8 MB below 128 channels.
// Past that the transforms stream through memory and oneDNN's direct convolution, near the FMA
// peak, is as fast or faster; below 64 channels the transforms cost more than the GEMMs save.
// At batch 1 ResNet-18's 64- and 128-channel convolutions took 0.5-0.55 ms instead of 1.0-1.1; at
// batch 8 the 128- and 256-channel ones 5.5-5.7 ms instead of 7.9-8.0.
//
// Results differ from a direct convolution by ~1e-5 of the largest output; inputs with NaN or
// infinities are convolved directly with the dense %w (runtime/winograd_conv.h).
// KILN_DISABLE=winograd_conv keeps oneDNN's.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of convolutions rewritten.
int winograd_conv(ir::Graph& graph);

/// Whether winograd_conv would take this convolution (`aten::conv2d` or oneDNN's, before or
/// after prepack_conv) by its filter, settings and sizes. prepack_conv asks, because a Winograd
/// convolution adds a residual in its output transform at no cost, wherever the residual lives.
bool winograd_takes(const ir::Node& conv, const ir::Value& weight);

}  // namespace kiln
