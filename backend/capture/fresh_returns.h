// Returned tensors that constant propagation folded, computed again on every call.
//
// TorchScript's ConstantPropagation folds whatever depends on constants alone: a frozen module's
// `return self.table.clone()`, or after a specialization fixes the sizes, `torch.zeros(x.shape)`.
// The graph then returns one constant tensor, the same one every call, where eager returns a
// new tensor each time: a caller that writes into its result (or an in-place op on it) would
// change every later call's result. Those returns get an `aten::clone` of the constant, which
// kiln's constant folding leaves to run time (passes/fold_constants.h). A tensor the graph
// returned as a constant before the fold (a frozen attribute, `return self.table`) is left as
// it is: eager returns the same tensor every call too.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <vector>

namespace kiln {

/// Where a returned value sits: the graph output's index, then the element's index in each
/// tuple or list built for it.
using ReturnPath = std::vector<size_t>;

/// The paths of the tensors `graph` returns that it computes: neither a constant nor a module
/// attribute (which freezing makes a constant).
std::vector<ReturnPath> computed_returns(const torch::jit::Graph& graph);

/// Gives each of `computed` that is now a tensor constant a clone of it to return instead.
/// Returns how many it gave one.
int clone_folded_returns(torch::jit::Graph& graph, const std::vector<ReturnPath>& computed);

}  // namespace kiln
