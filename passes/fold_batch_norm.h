// Batch-norm folding (eval mode): a batch norm whose input is a convolution or a linear with
// frozen weights is folded into that op's weight and bias. The new weight and bias are written as
// ops on the constants; fold_constants then computes them once, at compile time.
//
//   %y = aten::conv2d(%x, %w, %b) {...}
//   %z = aten::batch_norm(%y, %gamma, %beta, %mean, %var) {training=false, eps=1e-05, ...}
// becomes (s = gamma / sqrt(var + eps), viewed as [C, 1, 1, 1])
//   %w2 = aten::mul.Tensor(%w, view(s))            // on constants: folded
//   %b2 = aten::add.Tensor(mul(sub(%b, %mean), s), %beta)
//   %z  = aten::conv2d(%x, %w2, %b2) {...}
//
// Folding rounds differently than normalizing the output (by a few float32 ulps); it applies to
// float32 and float64 only, and only where the conv/linear output feeds nothing else.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of batch norms folded.
int fold_batch_norm(ir::Graph& graph);

}  // namespace kiln
