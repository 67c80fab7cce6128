// The device reads of a graph whose tensors are all on the CPU, folded to constants.
//
// The signature fixes the inputs' devices (fold_metadata.h), but not those of the values the
// graph computes: the meta run that finds their sizes (fold_computed_shapes.h) knows only a meta
// device. Scripted nn.MultiheadAttention asks every operand for its device before it takes the
// fused path (`x.device.type in [...]`), so in scripted ViT that check and everything after it,
// a branch per layer, stayed in the interpreter. Where every tensor input of the signature and
// every tensor constant is on the CPU, and no op can make a tensor elsewhere (no Device argument
// but None, a CPU constant or another device read; no `.cuda()`-like op; no Python op), every
// tensor the graph makes is on the CPU: each `prim::device` becomes that constant.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/ir/ir.h>

#include <vector>

namespace kiln {

/// `inputs` are the call's arguments after self. Returns whether it folded anything.
bool fold_cpu_devices(torch::jit::Graph& graph, const std::vector<c10::IValue>& inputs);

}  // namespace kiln
