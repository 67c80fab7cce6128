// Convolution branches merged: convolutions of one input with frozen weights whose results are
// summed are one convolution, its filter the sum of theirs, the smaller ones padded to the
// largest's size around their centres (structural reparameterization, as RepVGG and MobileOne do
// by hand for deployment; kiln does it for the model as written):
//
//   %a = aten::conv2d(%x, %w3, %b3) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}
//   %b = aten::conv2d(%x, %w1, %b1) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1}
//   %y = aten::add.Tensor(%a, %b) {alpha=1}
// becomes
//   %w = %w3 with %w1 added to its centre: aten::slice.Tensor of %w3 down to [8,8,1,1], an
//        aten::add.Tensor there, aten::slice_scatter back (all folded)
//   %c = aten::add.Tensor(%b3, %b1)                                                   (folded)
//   %y = aten::conv2d(%x, %w, %c) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1}
//
// A sum of several terms (a chain of adds, each read by the next alone: MobileOne adds its
// identity, its 1x1 branch and its kxk branches one by one) merges the convolutions among its
// terms pairwise and is written again over what is left. Only where two sample the same grid: the
// same input, stride, groups and output type, no dilation, odd kernels the smaller of which fits
// inside the larger, paddings that centre them alike; each branch read by the add alone. After
// fold_batch_norm (each branch's batch norm is then in its weights); fold_constants computes the
// new weight and bias. The sum's products are added in another order: results move by rounding.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of additions of two branches made one convolution.
int merge_conv_branches(ir::Graph& graph);

}  // namespace kiln
