// Lowers a fusion group (the body of a "kiln::fused" node) to one kernel.
//
// The kernel's iteration space is the shape of the group's reduction input (or, with no
// reduction, of its outputs), permuted so that the reduced dimensions come last. Each body input
// becomes an input buffer, loaded through strides that broadcast it (stride 0 on size-1 and
// missing dimensions); each body output becomes an output buffer stored through its own strides.
// Nodes that consume a reduction's output without keeping its dimensions work in "row space":
// their operands are aligned to the reduction's output shape.
#pragma once

#include <string>

#include "passes/ir/graph.h"
#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// Throws std::invalid_argument when the group breaks the rules the fusers keep.
Kernel lower_group(const ir::Graph& body, const std::string& name);

}  // namespace kiln::kernel
