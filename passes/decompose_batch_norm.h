// Batch-norm decomposition (eval mode): a batch norm that fold_batch_norm could not fold into a
// convolution or a linear (its input comes from anything else: an add, a concatenation, a
// reshape, a graph input) becomes a per-channel multiply and add, elementwise ops that the fusers
// join with the ops around it instead of an ATen call between kernels.
//
//   %z = aten::batch_norm(%x, %gamma, %beta, %mean, %var) {training=false, eps=1e-05, ...}
// becomes, for x of shape [N, C, H, W] (s and t are [C], viewed as [C, 1, 1])
//   %s = aten::mul.Tensor(aten::rsqrt(aten::add.Scalar(%var, eps)), %gamma)   // on constants
//   %t = aten::sub.Tensor(%beta, aten::mul.Tensor(%mean, %s))                 // on constants
//   %z = aten::add.Tensor(aten::mul.Tensor(%x, view(%s)), view(%t))
//
// which is ATen's own order of operations for an eval-mode batch norm on the CPU (a scale and a
// shift per channel, then x * scale + shift). fold_constants computes s and t once, at compile
// time. It applies where the running statistics (and weight and bias, where present) are
// constants, every tensor has the output's dtype, and that dtype is float32 or float64 (ATen
// computes a half-precision batch norm in float32 and rounds once, which x * s + t would not).
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of batch norms decomposed.
int decompose_batch_norm(ir::Graph& graph);

}  // namespace kiln
