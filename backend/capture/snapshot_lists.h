// Lists built and appended to in straight-line code, read between the appends: each read takes
// a list of what the list holds at that point, and the appends go.
//
// A scripted DenseNet keeps its features in a list that every layer appends to and the next
// layer concatenates:
//
//   %features = prim::ListConstruct(%x)
//   %c1 = aten::cat(%features, 1)
//   %a = aten::append(%features, %f1)
//   %c2 = aten::cat(%features, 1)
//
// TorchScript's RemoveListMutation leaves such a list (it is read between appends), so every
// `cat` reads a list the graph changes, stays in the interpreter and cuts the graph: scripted
// DenseNet-121 ran as 64 regions, with each layer's input checks (`input.dim() != 4`) left
// unfolded on values whose sizes the specialization could not follow through the list. After
// this pass `%c2 = aten::cat(prim::ListConstruct(%x, %f1), 1)`.
//
// Only a list made by prim::ListConstruct in the top-level block whose every use is there too:
// appends whose result nothing reads, prim::ListUnpack, and ops with a schema that write none of
// their arguments and return no list (which could be the list itself, read after a later
// append). Anything else (a loop or branch using it, a call, a return) leaves the list as it is.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace kiln {

/// Returns the number of lists rewritten.
int snapshot_lists(torch::jit::Graph& graph);

}  // namespace kiln
