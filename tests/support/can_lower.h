// can_lower (passes/kernel/lower_ops.h) on a graph written as text, for the lowering tests.
#pragma once

#include <string>

#include "passes/ir/parser.h"
#include "passes/kernel/lower_ops.h"

namespace kiln::testing {

/// can_lower for the first node of a one-node graph.
inline bool can_lower_first(const std::string& text) {
  auto g = ir::parse_graph(text);
  return kernel::can_lower(*g->nodes().at(0));
}

}  // namespace kiln::testing
