// Constant folding: every node that depends only on frozen weights (prim::Constant) is computed
// once, at compile time, and becomes a constant itself.
//
//   %w : f32[4,8] = prim::Constant() {index=0}
//   %s : f32[4,1] = prim::Constant() {index=1}
//   %v : f32[4,8] = aten::mul.Tensor(%w, %s)
//   %y : f32[2,4] = aten::linear(%x, %v) {bias=None}
// becomes
//   %v : f32[4,8] = prim::Constant() {index=2}      // the product, computed by `evaluate`
//   %y : f32[2,4] = aten::linear(%x, %v) {bias=None}
//
// passes/ holds no tensors: `evaluate` (the runtime's) runs the node on the constants and
// returns the index of the new constant. Only ops in the op table (pure) and a few pure extern
// ops (factories such as `zeros` and `arange`, `slice_scatter`, `masked_fill`, `triu`) with one
// output are folded, none whose result is much larger than its inputs (an expand would turn a
// scalar into a full tensor of weights), and none whose result the graph returns or a returned
// value views (each call returns tensors of its own, which the caller may write).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

/// An index in place of a constant's: the input is not a constant, but the op reads only its type
/// (`x.new_zeros(...)`, `zeros_like(x)`), so any tensor of the input's type stands in for it.
inline constexpr int64_t kTypeOnlyInput = -1;

/// Computes `node` from the constants at `inputs` (their indices, or kTypeOnlyInput); returns
/// the new constant's index, or nullopt when it cannot (the node stays).
using ConstantEvaluator =
    std::function<std::optional<int64_t>(const ir::Node& node, const std::vector<int64_t>& inputs)>;

/// Returns the number of nodes folded.
int fold_constants(ir::Graph& graph, const ConstantEvaluator& evaluate);

/// True for frozen weights and what is computed from them alone through op-table ops and the pure
/// extern ops: what fold_constants computes at compile time (passes before it use this to find
/// weights).
bool from_constants(const ir::Value* value);

}  // namespace kiln
