// Shared by the folds of a specialization (specialize_graph.cpp, fold_computed_shapes.cpp):
// what the signature fixes becomes a constant.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <vector>

namespace kiln {

/// Whether some op may change `value`'s sizes or requires_grad in place: a use whose schema
/// writes the argument, or a use by a node without a schema (a list, a loop) that could pass it
/// on to one. Metadata reads (prim::dtype, ...), returns and kiln's regions write nothing.
bool may_be_written(const torch::jit::Value* value);

/// Replaces the uses of `value` by a constant holding `constant`, inserted where `value` is
/// defined. False when `value` has no uses left or TorchScript cannot hold `constant`.
bool replace_with_constant(torch::jit::Value* value, const c10::IValue& constant);

/// The shape reads of `value` (aten::dim, aten::size) become constants from `sizes`, but for
/// reads of the `unknown` dims (and of all sizes at once where there are some). Returns whether
/// it folded one.
bool fold_shape_reads(torch::jit::Value* value, c10::IntArrayRef sizes,
                      const std::vector<int>& unknown = {});

/// The metadata reads of `value` (prim::dtype, prim::device, prim::requires_grad, prim::is_cuda,
/// aten::dim, aten::size) become constants taken from `tensor`, which has its metadata; the
/// sizes of its `unknown` dims stay reads. Returns whether it folded one.
bool fold_metadata(torch::jit::Value* value, const at::Tensor& tensor,
                   const std::vector<int>& unknown = {});

}  // namespace kiln
