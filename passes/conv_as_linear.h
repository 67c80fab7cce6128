// A convolution that sees one pixel is a matrix product: a 1x1 kernel over a 1x1 image, without
// padding or groups (the squeeze-and-excitation gates of MobileNetV3, EfficientNet and RegNetY,
// which squeeze the image to its channel means first). It becomes a linear between two views:
//
//   %y : f32[1,240,1,1] = aten::convolution(%x, %w, %b) {stride=[1,1], padding=[0,0], ...,
//                                                        groups=1}   (%x : f32[1,960,1,1])
// becomes
//   %x_rows : f32[1,960] = aten::view(%x) {size=[1,960]}
//   %w_rows : f32[240,960] = aten::view(%w) {size=[240,960]}                   (folded)
//   %y_rows : f32[1,240] = aten::linear(%x_rows, %w_rows, %b)
//   %y : f32[1,240,1,1] = aten::view(%y_rows) {size=[1,240,1,1]}
//
// so that prepack_linear and the kernel generator treat it as the linear it is: at a few rows
// kiln's own kernel computes it (a oneDNN convolution step costs over 10 us however small, most
// of it around oneDNN's own 1-2 us), and under precision=bf16 that kernel reads a bf16 weight.
// Frozen float32 weights on the CPU only; runs where prepack_linear does, just before it.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of convolutions rewritten.
int conv_as_linear(ir::Graph& graph);

}  // namespace kiln
