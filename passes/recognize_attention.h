// Under precision=bf16: attention written out as a matrix product, a scale, an additive mask, a
// softmax and a second product becomes ATen's fused attention, which bf16_activations can then
// run in bf16 (`Q K^T` and `P V` as bf16 products with float32 sums, the softmax in float32):
//
//   %s = aten::matmul(%q, %kt)                  (q [B, H, L, D], kt [B, H, D, S])
//   %c = aten::mul.Scalar(%s) {other=0.125}     (or div.Scalar by 8; or none)
//   %m = aten::add.Tensor(%c, %mask)            (a float32 mask that broadcasts; or none)
//   %p = aten::softmax.int(%m) {dim=-1}         (or aten::_softmax)
//   %o = aten::matmul(%p, %v)                   (v [B, H, S, Dv])
// becomes
//   %k = aten::transpose.int(%kt) {dim0=2, dim1=3}
//   %o = aten::scaled_dot_product_attention(%q, %k, %v, %mask) {scale=0.125, ...}
//
// Scores masked by a fill instead of an add (nanoGPT's `masked_fill(mask, -inf)`, transformers'
// `where(mask, scores, finfo.min)`, dynamo's `where` with a 0-d fill) take an additive mask made
// from the bool one: `aten::where.Scalar(%mask) {self=-inf, other=0}` (which fold_constants
// computes where the mask is a weight's), the same probabilities for any fill at or below -1e38.
// BERT's eager attention (and GPT-2's where no causal mask is applied), and any model that writes
// its own. Dynamo's graphs write each 4-D product as a view of an aten::bmm of views of
// no-op expands; both forms are taken.
// ATen's attention computes softmax(q k^T * scale + mask) v, the same function: in float32 its
// results move by rounding only. Every intermediate must be read by the pattern alone (an
// attention's probabilities returned to the caller keep it as written), all of q, k, v and the
// scores float32, B and H the same for all three (no broadcast). Run only under bf16: in float32
// ATen's fused attention is no faster than kiln's products around a fused softmax kernel.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of attentions recognized.
int recognize_attention(ir::Graph& graph);

}  // namespace kiln
