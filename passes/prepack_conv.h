// Weight prepacking for convolutions (CPU, float32, channels-last): a 2-D convolution whose
// weight is frozen and whose input assign_layout made channels-last runs on oneDNN's convolution
// with the weight reordered once, at compile time, into oneDNN's blocked layout, and with a
// following relu or hardtanh (relu6) applied inside it as a post-op. A residual add that alone
// reads the convolution (and a relu after it) goes inside too, as `_convolution_pointwise.binary`
// placed where the add was (ResNet computes the other operand after the convolution):
//
//   %y : f32[1,64,56,56]{...cl} = aten::conv2d(%x_nhwc, %w, %b) {stride=[1,1], padding=[1,1],
//                                                                dilation=[1,1], groups=1}
//   %r : f32[1,64,56,56]{...cl} = aten::relu(%y)
// becomes
//   %w_mkldnn = aten::to_mkldnn(%w) {dtype=None}                                    (folded)
//   %w_packed = aten::mkldnn_reorder_conv2d_weight(%w_mkldnn) {padding, stride, dilation,
//                                                   groups, input_size=[1,64,56,56]} (folded)
//   %r = mkldnn::_convolution_pointwise(%x_nhwc, %w_packed, %b) {padding, stride, dilation,
//                                        groups, attr="relu", scalars=[], algorithm=""}
//
// ATen's channels-last convolution reorders the dense weight on every call; with the packed
// weight ResNet-18's convolutions took 6.9 ms instead of 8.3 ms at batch 1 here (the 512-channel
// 3x3 ones 0.88 ms instead of 1.58). Only channels-last inputs: with a packed weight oneDNN
// returns channels-last whatever the input, and the graph's types must stay what they were.
// Runs where prepack_linear does (oneDNN present, no autograd); the weights are held twice.
#pragma once

#include <unordered_map>
#include <unordered_set>

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of convolutions rewritten. `residual_anywhere`: the onednn_conv pass will run
/// the convolutions on kiln's own oneDNN primitive, so a residual add joins its convolution
/// wherever its other operand lives (the primitive's binary post-op reads the operand where it
/// lies; ATen's op copies it unless it can write over it: see written_in_place), and the input
/// may have any strides (the op copies one that is not dense channels-last or NCHW).
int prepack_conv(ir::Graph& graph, bool residual_anywhere = false);

/// The dense frozen weight behind a packed weight prepack_conv made (to_mkldnn +
/// mkldnn_reorder_conv2d_weight), or null when `packed` is not one.
ir::Value* prepacked_dense_weight(const ir::Value& packed);

/// For a pass that rewrites prepack_conv's convolutions into ops of its own: one reader of
/// `packed` is gone (`readers` counts those left); past the last, its packing chain goes into
/// `removed`.
void release_packed_weight(ir::Value& packed, std::unordered_map<const ir::Value*, int>& readers,
                           std::unordered_set<const ir::Node*>& removed);

}  // namespace kiln
