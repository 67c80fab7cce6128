// Weight prepacking for linear layers (CPU, float32): a linear whose weight is frozen and whose
// product is large runs on oneDNN's matmul, its weight reordered once, at compile time, into the
// blocked layout oneDNN's kernel reads. ATen's linear calls BLAS on the dense weight, which on
// BERT-base's layers was measured 1.4x-1.8x slower (docs/passes.md).
//
//   %w : f32[3072,768] = prim::Constant() {index=0}
//   %y : f32[128,3072] = aten::linear(%x, %w, %b)
// becomes
//   %wp : f32[3072,768] = mkldnn::_reorder_linear_weight(%w) {batch_size=128}   (folded)
//   %y : f32[128,3072] = mkldnn::_linear_pointwise(%x, %wp, %b) {attr="none", scalars=[],
//                                                                algorithm=""}
//
// fold_constants computes %wp: a tensor in oneDNN's opaque layout (its type keeps the dense
// sizes; only _linear_pointwise reads it). Not applied where the weight is a graph input (it
// would be reordered on every call), where the product has fewer than kMinPrepackedMacs
// multiply-adds (oneDNN's fixed cost per call, ~20 us here, outweighs the gain), or to the
// linears kiln lowers to its own kernels (at most 4 rows). oneDNN sums in another order than
// BLAS: results differ by float32 rounding (relative ~1e-6), as between any two GEMMs.
// The runtime offers it only where autograd is not needed (_linear_pointwise has no backward)
// and ATen has oneDNN.
#pragma once

#include <cstdint>

#include "passes/ir/graph.h"

namespace kiln {

inline constexpr int64_t kMinPrepackedMacs = int64_t{1} << 22;

/// Returns the number of linears rewritten. `own_primitive`: the runtime has kiln's own oneDNN
/// matmul (runtime/onednn_linear.h), whose primitive is made once per shape, not on every call:
/// the linears become
///   %w_onednn = kiln::onednn_linear_weight(%w) {rows=128, bias=true}               (folded)
///   %y = kiln::onednn_linear(%x, %w, %w_onednn, %b)
/// and, with no fixed cost to amortize, every linear that kiln does not lower to its own kernel
/// is taken, however small (kMinOwnPrimitiveMacs). `bf16` (own_primitive only): both nodes get
/// {precision="bf16"}: the weight is packed in bf16 and the product taken in bf16, summed in
/// float32 (the compile option precision=bf16).
/// With `own_primitive` (and not `bf16`), the products whose operands change from call to call
/// run on kiln's oneDNN matmul too, unpacked (runtime/onednn_matmul.h), with the bias add and
/// activation after them: a linear whose weight is not frozen (a training graph's forward) and
/// an aten::mm (its backward), where the input is row-major:
///   %y = kiln::onednn_matmul(%x, %w, %b) {other_transposed=true, activation="relu"}
/// Measured against ATen's on this project's machines: 1.0x-2.0x for those; 0.67x-1.24x where
/// the input is transposed (a weight's gradient), which stays ATen's.
int prepack_linear(ir::Graph& graph, bool own_primitive = false, bool bf16 = false);

inline constexpr int64_t kMinOwnPrimitiveMacs = 0;

}  // namespace kiln
