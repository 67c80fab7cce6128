// Folds into a specialization's graph what its input signature (signature.h) fixes, so the
// checks a module makes of its inputs run once, at compile time, instead of in the TorchScript
// interpreter on every call. nn.TransformerEncoderLayer's fast path, for one, tests the dim,
// device, dtype and requires_grad of its input and weights, grad mode and autocast before its
// one fused op: about 150 interpreter ops per call; after folding, 4 reads of the attention
// weights are left (they require grad, so TorchScript cannot make them constants).
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

namespace kiln {

/// `graph` is the captured forward (input 0 is self, the frozen module `self`); `inputs` the
/// call's arguments after self. Folds, then runs constant propagation and dead code elimination:
/// - inputs that are None (None-ness is in the signature);
/// - dtype, device, requires_grad, dim and sizes of tensor inputs (all in the signature), for
///   inputs that no op writes in place (an in-place op can change sizes or requires_grad);
/// - grad mode and the autocast states (in the signature);
/// - attributes of the frozen module read by prim::GetAttr, when the graph sets none
///   (prim::SetAttr) and hands none that could change in place (a tensor, a list) to an op that
///   might change it: constants where TorchScript allows (not a tensor that requires grad),
///   otherwise their dtype, device, requires_grad, dim and sizes.
///
/// A size-generic specialization (a module shape class, compiled_module.cpp) names the dims of
/// its tensor inputs whose sizes vary (`unknown_dims[i]`: input i's): their size reads stay, as
/// do the sizes of every computed value; regions compute them per signature (size_nodes.h).
void specialize_graph(std::shared_ptr<torch::jit::Graph>& graph, const torch::jit::Module& self,
                      const std::vector<c10::IValue>& inputs,
                      const std::vector<std::vector<int>>& unknown_dims = {});

}  // namespace kiln
