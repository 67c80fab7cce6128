// Constant lists of tensors, built element by element where an op reads them.
//
// Tracing records `x[..., idx]` with a tensor index as `aten::index(x, [None, None, idx])`; where
// the index is a constant (a traced tensor, a frozen buffer), constant propagation folds the
// whole list into one `Tensor?[]` constant. The partitioner takes a tensor list into a region
// only where the graph builds it (prim::ListConstruct), element by element: such a constant list
// kept traced Falcon's four indexings in the interpreter, cutting its graph into three regions.
// Each constant list an op reads becomes a ListConstruct of one constant per element (None
// stays None). Run after the last constant propagation: it would fold them back.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace kiln {

/// Returns the number of lists unpacked.
int unpack_constant_lists(torch::jit::Graph& graph);

}  // namespace kiln
