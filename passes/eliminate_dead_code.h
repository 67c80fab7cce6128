// Removes nodes whose outputs nobody reads.
//
//   %1 : f32[4] = aten::exp(%x)          // unused
//   %2 : f32[4] = aten::relu(%x)
//   return (%2)
// becomes
//   %2 : f32[4] = aten::relu(%x)
//   return (%2)
//
// Every op in the graph IR is free of side effects (mutating ops never enter it), so a node is
// dead exactly when none of its outputs is used.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of nodes removed.
int eliminate_dead_code(ir::Graph& graph);

}  // namespace kiln
