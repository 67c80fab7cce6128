// Structural checks of a graph: every value is defined once and before its use, operator names
// are qualified, known operators get the number of inputs and outputs the op table says, types
// are well formed (strides match sizes, no negative sizes).
#pragma once

#include <string>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln::ir {

/// Every problem found, one sentence each; empty for a valid graph.
std::vector<std::string> verify_graph(const Graph& graph);

/// Throws kiln::ir::VerifyError listing the problems when the graph is invalid.
void check_graph(const Graph& graph, const std::string& after_pass = {});

}  // namespace kiln::ir
