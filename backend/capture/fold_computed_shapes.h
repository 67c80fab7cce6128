// The sizes of values a specialization's graph computes, folded to constants.
//
// A traced model asks its intermediates for their sizes: ShuffleNetV2's channel shuffle,
// `x.view(b, groups, c // groups, h, w)` with `b, c, h, w = x.size()`, traces to aten::size ->
// prim::NumToTensor -> aten::Int -> prim::ListConstruct -> aten::view. With its sizes computed at
// run time the view stays in the interpreter and cuts the graph (16 times in ShuffleNetV2). The
// signature fixes every tensor input's sizes, and through them those of every value that
// straight-line ops compute from the inputs and constants: running the graph once on meta tensors
// gives them, and their metadata reads become constants.
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <vector>

namespace kiln {

/// `graph` is a specialization's forward (input 0 is self), `inputs` the call's arguments after
/// self. Runs the top-level block's ops on meta tensors, skipping ops with side effects and ops
/// with data-dependent shapes; an op without a meta kernel runs once on CPU zeros instead,
/// unless it is random (that would draw from the user's generator): what a skipped op produces
/// stays unknown. Folds the shape reads of every value whose shape that run found, and numbers
/// computed from them. Does nothing when some op may change a tensor's sizes in place (resize_,
/// unsqueeze_, an out= variant, ...); ops that write data in place do not stop it.
/// Returns whether it folded anything.
///
/// `ranks_only` (a size-generic specialization, whose inputs' sizes vary): no size or element
/// count is read in the run, so only ranks, dtypes and numbers computed from them fold (a module's
/// `if x.dim() == 3` on a computed value). Not at all where the graph squeezes: a squeeze's rank
/// depends on whether a size is 1.
bool fold_computed_shapes(torch::jit::Graph& graph, const std::vector<c10::IValue>& inputs,
                          bool ranks_only = false);

}  // namespace kiln
