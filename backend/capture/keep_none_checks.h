// `x is None` on a tensor an op returns, kept for run time.
//
// Python sees an undefined tensor as None: nn.MultiheadAttention's fused op returns one for
// weights nobody asked for, and `y, w = attention(...); if w is None: ...` takes that branch in
// eager. TorchScript's types say the op returns a Tensor, and its peephole folds `x is None` to
// false wherever x is typed Tensor. Scripted, such a value comes out of a branch typed
// `Optional[Tensor]`, which is safe, until the specialization folds the branch away and the check
// reads the op's output directly: the model then took the other branch. Each `x is None` and
// `x is not None` on a Tensor-typed value an op returns becomes `kiln::is_none(x)` (and its
// negation), which runs when the graph does. Run before every PeepholeOptimize.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace kiln {

/// Returns the number of checks kept.
int keep_none_checks(torch::jit::Graph& graph);

}  // namespace kiln
