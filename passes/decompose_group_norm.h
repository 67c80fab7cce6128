// Group-norm decomposition (TorchScript's `group_norm`, and torch.compile's inference
// `native_group_norm` whose mean and rstd outputs nothing reads; a training graph's arrives
// decomposed by torch's own table, see bindings/kiln/_decompositions.py; the output keeps the
// node's type: ATen's CPU group norm keeps a channels-last input's layout, which the graph's
// types say for both, while a meta run of `group_norm` itself would not): the statistics become
// a sibling mean and
// variance per sample and channel, which fuse_reductions puts in one kernel (one walk over the
// input, in any layout), combined per group on [N, C]-sized tensors; the normalization with its
// affine becomes a per-channel multiply and add, which the fusers join with what follows (the
// activation of a GroupNorm + SiLU block):
//
//   %y = aten::group_norm(%x, %gamma, %beta) {num_groups=G, eps=1e-05, cudnn_enabled=true}
// becomes, for x of shape [N, C, H, W] (D = C / G channels per group)
//   %v, %m = aten::var.correction(%x), aten::mean.dim(%x)    // dims [2, 3], keepdim: [N, C, 1, 1]
//   per group, over the D channels of view(%m / %v, [N, G, D]) (dim 2, keepdim: [N, G, 1]):
//     %mean = mean(m);  %var = mean(v) + var(m)                // the law of total variance
//   %s = rsqrt(%var + eps) * view(%gamma, [1, G, D]);  %t = view(%beta, [1, G, D]) - %mean * %s
//   %y = aten::add.Tensor(aten::mul.Tensor(%x, view(%s, [N, C, 1, 1])), view(%t, [N, C, 1, 1]))
//
// The scale and shift per sample and channel, then x * scale + shift, are ATen's order of
// operations on the CPU; the group's statistics come from its channels' instead of one walk
// over the group, which needs no view of x (so any layout) and, channels-last, reads x with
// neighbouring channels in neighbouring vector lanes. Both are as accurate as a Welford update.
// It applies to float32/float64 inputs of rank 3 or more, non-empty, with a weight of shape [C]
// (without one, the scale would be per group and need broadcasting to the channels before its
// view: not done, such a group norm stays ATen's) and C divisible by G (otherwise ATen's own
// error is kept).
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of group norms decomposed.
int decompose_group_norm(ir::Graph& graph);

}  // namespace kiln
