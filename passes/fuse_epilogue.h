// Epilogue fusion: the elementwise ops that consume a GEMM or convolution output (bias, scale,
// activation, residual add) become one kernel that runs right after the extern GEMM/conv and
// reads its output once. The group is tagged with the op it finishes.
//
//   %y = aten::linear(%x, %w, %b)          %y = aten::linear(%x, %w, %b)
//   %z = aten::add.Tensor(%y, %res)   =>   %r = kiln::fused(%y, %res) {epilogue="aten::linear"}
//   %r = aten::gelu(%z)                       (body: add, gelu)
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of epilogue groups formed.
int fuse_epilogue(ir::Graph& graph);

}  // namespace kiln
