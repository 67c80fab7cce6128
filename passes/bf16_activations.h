// Under precision=bf16: the activations between kiln's oneDNN convolutions and linears in bf16, as
// OpenVINO's default keeps them. A convolution or linear that multiplies in bf16 rounds its
// float32 input to bf16 on every call (a pass over it that writes a copy); where the op before it
// writes bf16 instead, the reader reads half the bytes and rounds nothing, and the writer writes
// half.
//
//   %y : f32[1, 64, 56, 56] = kiln::onednn_conv2d(%x, ...) {..., precision="bf16"}
//   %z = kiln::onednn_conv2d(%y, ...) {..., precision="bf16"}
// becomes
//   %y : bf16[1, 64, 56, 56] = kiln::onednn_conv2d(%x, ...) {..., precision="bf16",
//                                                           out_precision="bf16"}
//   %z = kiln::onednn_conv2d(%y, ...) {..., precision="bf16"}
//
// A bf16 convolution's or linear's output becomes bf16 where nothing but kiln's oneDNN convolutions
// and linears read it, each as its input (one that multiplies in bf16) or a convolution as its
// residual `other` (added by a binary post-op, which reads bf16 as it is), and it is not a graph
// output: a transformer's first feed-forward linear (its GELU a post-op) into the second. The
// post-ops still compute in float32; the output is rounded once, at the end: where the reader would
// have rounded it anyway, the result is the same. A residual read in bf16 is the one new rounding:
// the add's operand loses float32's low bits, as OpenVINO's default does too. A max pool between
// them (ResNet's, after its stem) computes in bf16 too where its result is read so: rounding keeps
// order, so the max of rounded values is the rounded max, the same values at half the bytes.
//
// A bf16 linear whose input a generated kernel computes (a layer norm before a transformer's
// projections) reads a bf16 copy of it, an aten::_to_copy the fusers then put into that kernel:
// the kernel rounds as it stores, the same rounding the linear would have made.
//
//   %h : f32[1, 197, 192] = aten::layer_norm(%x, ...)
//   %y = kiln::onednn_linear(%h, ...) {..., precision="bf16"}
// becomes
//   %h : f32[1, 197, 192] = aten::layer_norm(%x, ...)
//   %h_bf16 : bf16[1, 197, 192] = aten::_to_copy(%h) {dtype=15, ...}
//   %y = kiln::onednn_linear(%h_bf16, ...) {..., precision="bf16"}
//
// A depthwise or narrow-grouped convolution stays float32 (onednn_conv's rule), and so do the
// activations it reads: oneDNN's bf16 kernels for those run slower than its float32 ones even on
// bf16 activations (docs/precision.md), and making them multiply in bf16 would add their
// weights' rounding to the error.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of values now bf16: convolutions' and linears' outputs, and kernels'
/// outputs rounded for the linears that read them.
int bf16_activations(ir::Graph& graph);

}  // namespace kiln
