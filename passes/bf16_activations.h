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
// Views (a reshape, a permute, a slice) and clones pass bf16 through, and so does ATen's fused
// attention on the CPU where its q, k and v all arrive in bf16 (ViT's and BERT's are views of bf16
// linears' outputs, or kernels compute them for it) and its output goes to bf16 readers: it then
// multiplies in bf16 with float32 sums and a float32 softmax, as OpenVINO's default does, instead
// of in float32. A float32 mask is read as it is. The set of values made bf16 is the largest one
// where every writer can write bf16 and every reader reads bf16 anyway, found by dropping values
// that break either rule: an attention's q, k and v stand or fall together.
//
// A generated kernel whose output only such readers read (a rotary embedding's q and k for the
// attention; an SE block's product for a 1x1 convolution) writes it in bf16 instead: an
// aten::_to_copy right after it, which the fusers put into that kernel as its output.
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

/// Returns the number of values now bf16: convolutions', linears' and attentions' outputs, and
/// kernels' outputs rounded for their readers (views and pools not counted).
int bf16_activations(ir::Graph& graph);

}  // namespace kiln
