// Canonicalize: one form per computation, so later passes (fusion, CSE, the GEMM epilogue) meet
// fewer spellings of the same thing. Every rewrite gives bit-identical results.
//
//   %t : f32[8,4] = aten::t(%w)
//   %y : f32[2,4] = aten::addmm(%b, %x, %t) {beta=1, alpha=1}   ==>  aten::linear(%x, %w, %b)
//   aten::mm(%x, %t) or aten::matmul(%x, %t)                    ==>  aten::linear(%x, %w)
//   a frozen 2-D weight %c in %t's place (GPT-2's [in, out] Conv1D weight, or TorchScript's
//     folded w.t())                                            ==>  aten::linear(%x, aten::t(%c))
//   %z : f32[4]   = aten::sub.Tensor(%a, %c) {alpha=2}          ==>  aten::add.Tensor {alpha=-2}
//   %q : f32[4]   = aten::div.Scalar(%a) {other=4}              ==>  aten::mul.Scalar {other=0.25}
//   aten::t(aten::t(%x)), transpose twice, permute of permute   ==>  %x (or one permute)
//   aten::view(aten::view(%x)) of a contiguous %x               ==>  one view (reshape likewise)
//   %y : f32[1,128,N] = aten::view(aten::linear(aten::view(%x) {size=[-1,K]}, %w, %b)) of a
//     contiguous %x : f32[1,128,K] (a traced GPT-2 Conv1D)     ==>  aten::linear(%x, %w, %b)
//   aten::to.dtype / type_as to the same dtype, contiguous of a contiguous value  ==>  the input
//   aten::clone(%x) keeping %x's layout (eval-mode dropout)      ==>  %x (a graph output only
//     when %x is a fresh result of a computing op)
//   %p, %i = aten::max_pool2d_with_indices(%x) {...}, %i unread  ==>  %p = aten::max_pool2d(%x)
//     (and max_pool3d_with_indices likewise)
//   %y, %m, %s = aten::_native_batch_norm_legit_no_training(%x, %w, %b, %mean, %var) {...}, %m
//     and %s unread (AOTAutograd's eval batch norm)  ==>  %y = aten::batch_norm(...)
//     {training=false}
//   aten::logical_not(aten::eq.Scalar(%x) {other=c})            ==>  aten::ne.Scalar(%x) {other=c}
//     (and ne to eq)
//   %a : b8[8,4,1] = aten::any.dim(aten::ne.Scalar(%s) {other=-inf}) {dim=-1, keepdim=true}
//     of a floating %s (PyTorch's attention with a float mask)
//                                  ==>  aten::ne.Scalar(aten::amax(%s) {dim=[2], keepdim=true})
//
// A division is turned into a multiplication only by a power of two, whose reciprocal is exact.
// A rewrite that would make a graph output alias a graph input or another output is skipped.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of rewrites.
int canonicalize(ir::Graph& graph);

}  // namespace kiln
