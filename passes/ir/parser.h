// Reads the text that print_graph writes. Tests write graphs this way.
#pragma once

#include <memory>
#include <string>

#include "passes/ir/graph.h"

namespace kiln::ir {

/// Parses a graph; throws kiln::ir::ParseError with the line and column of the first problem.
std::unique_ptr<Graph> parse_graph(const std::string& text);

}  // namespace kiln::ir
