// Reduction fusion: a reduction or normalization (sum, mean, amax, amin, softmax, log_softmax,
// layer_norm) joins its elementwise producers and consumers in one kernel, so a layer norm with
// its affine transform and the following activation reads its input once and writes once.
//
//   %s = aten::mul.Scalar(%x) {other=2}        %r = kiln::fused(%x) {reduction="aten::softmax.int"}
//   %p = aten::softmax.int(%s) {dim=-1}   =>      (body: mul, softmax, gelu)
//   %r = aten::gelu(%p)
//
// A small aten::linear (a few rows, see kernel::is_contraction) counts as a reduction over K, so
// a batch-1 layer with its bias and activation is one kernel. A group holds one normalization
// or contraction, or reductions (sum, mean, amax, amin, var, std) of one shape over the same
// dims: siblings, which the kernel computes from one read of what they share.
// Producers must have the reduction input's shape or broadcast to it without being read outside the
// group; consumers work either on whole rows (the input's shape) or on the reduced values (the
// output's shape).
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of groups formed.
int fuse_reductions(ir::Graph& graph);

}  // namespace kiln
