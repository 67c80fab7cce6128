// Text form of the graph IR; parse_graph (parser.h) reads it back.
//
//   graph(%x : f32[2,3], %w : f32[4,3]):
//     %0 : f32[4,3] = prim::Constant() {index=0}
//     %1 : f32[2,4] = aten::linear(%x, %0) {bias=None}
//     %2 : f32[2,4] = aten::relu(%1)
//     return (%2)
#pragma once

#include <string>

#include "passes/ir/graph.h"

namespace kiln::ir {

std::string print_graph(const Graph& graph);

}  // namespace kiln::ir
