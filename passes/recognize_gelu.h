// GELU written out in its tanh form becomes one `aten::gelu(x, approximate="tanh")`:
//
//   %h = aten::mul.Scalar(%x) {other=0.5}
//   %p = aten::pow.Tensor_Scalar(%x) {exponent=3}
//   %c = aten::mul.Scalar(%p) {other=0.044715}
//   %s = aten::add.Tensor(%x, %c) {alpha=1}
//   %u = aten::mul.Scalar(%s) {other=0.7978845608}          (sqrt(2 / pi))
//   %t = aten::tanh(%u)
//   %o = aten::add.Scalar(%t) {other=1, alpha=1}
//   %y = aten::mul.Tensor(%h, %o)                 ==>  %y = aten::gelu(%x) {approximate="tanh"}
//
// as GPT-2, GPT-J, BLOOM and many other models write it (transformers' NewGELUActivation). One op
// is what prepack_linear can make a oneDNN linear's post-op, computed while the linear's output
// is in cache, instead of an elementwise kernel that reads it back from memory. The values are
// the same function, rounded differently: ATen's gelu computes the same expression in float32
// in another order, so results move by float32 rounding only. Float32 only (in bf16 or f16, eager
// rounds after every op, which one gelu would not). Every intermediate value must be read by the
// pattern alone (not a graph output, nothing a backward saves); the operands of the adds and the
// last multiply may come in either order.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of GELUs recognized.
int recognize_gelu(ir::Graph& graph);

}  // namespace kiln
