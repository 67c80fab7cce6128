// Elementwise fusion: chains and DAGs of elementwise ops (with broadcasting, scalars and type
// promotion) become one kiln::fused node, which the code generator turns into one kernel.
//
//   %t = aten::mul.Tensor(%x, %y)          %r = kiln::fused(%x, %y, %b)
//   %u = aten::add.Tensor(%t, %b)    =>       (body: mul, add, relu)
//   %r = aten::relu(%u)
//
// Seeds are taken from the last node backwards, so a group's iteration space is the shape of its
// latest (usually largest) node. Runs after fuse_reductions and fuse_epilogue, on what is left.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of groups formed.
int fuse_elementwise(ir::Graph& graph);

}  // namespace kiln
