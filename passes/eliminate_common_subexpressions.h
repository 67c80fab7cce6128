// Merges nodes that compute the same thing: the same op on the same inputs with the same
// attributes. Later copies are replaced by the first one.
//
//   %a : f32[4] = aten::exp(%x)
//   %b : f32[4] = aten::exp(%x)
//   %c : f32[4] = aten::add.Tensor(%a, %b) {alpha=1}
// becomes
//   %a : f32[4] = aten::exp(%x)
//   %c : f32[4] = aten::add.Tensor(%a, %a) {alpha=1}
//
// Only ops in kiln's op table are merged: they are pure. An op outside it (a random number
// generator, an op whose shape came from a sample run) may differ between two calls. Frozen
// constants with the same index are one value.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of nodes removed.
int eliminate_common_subexpressions(ir::Graph& graph);

}  // namespace kiln
