// nn.TransformerEncoderLayer's inference fast path (and so nn.TransformerEncoder's) calls one
// fused ATen op, `aten::_transformer_encoder_layer_fwd` (from TorchScript and from dynamo alike),
// and nn.MultiheadAttention's calls `aten::_native_multi_head_attention` (from TorchScript; dynamo
// traces its op-by-op path instead). Imported whole,
// kiln could only call them, and their GEMMs run on unpacked weights. Their parts are ops kiln
// compiles well: linears on prepacked weights with fused epilogues, ATen's fused attention
// kernel, fused residual add + layer_norm. So the importer expands them into those parts: the
// modules' documented math, which their non-fast paths compute op by op too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/capture/import_ops.h"

namespace kiln {

/// The parts of `op` appended to `ops`, one value per output of the op; nullopt for any other
/// op and where it does not expand (an attention mask, flags that are not constants, attention
/// weights asked for, attention that is not self-attention, an input that is not a 3-D float
/// tensor whose embedding splits into the heads): the caller then imports the op whole. An
/// output the op returns as None (the attention weights with need_weights=False) is nullptr.
/// `args` are the op's arguments in schema order.
std::optional<std::vector<ir::Value*>> expand_transformer_op(OpImporter& ops, const std::string& op,
                                                             const std::vector<ImportArg>& args);

}  // namespace kiln
