// What `explain` says of each op of a compiled graph: where it runs (a fused kernel, ATen) and
// why.
#pragma once

#include <vector>

#include "kiln/explain.h"
#include "passes/ir/graph.h"
#include "passes/plan_memory.h"

namespace kiln {

/// One entry per op of `graph` after the pipeline: each member of a fusion group, with its
/// kernel, and every other op but constants, with the reason it runs through ATen.
std::vector<ExplainEntry> explain_graph(const ir::Graph& graph, const MemoryPlan& memory);

}  // namespace kiln
