// nn.TransformerEncoderLayer's inference fast path (and so nn.TransformerEncoder's) calls one
// fused ATen op, `aten::_transformer_encoder_layer_fwd`, from TorchScript and from dynamo alike.
// Imported whole, kiln could only call it. Its parts are ops kiln compiles well: linears on
// prepacked weights with fused epilogues, a fused softmax, fused residual add + layer_norm. So
// the importer expands the op into those parts: the layer's documented math, which its
// non-fast path computes op by op too.
#pragma once

#include <optional>
#include <vector>

#include "backend/capture/import_ops.h"

namespace kiln {

/// The op's parts, appended to `ops`, with its one output; nullopt where it does not expand (an
/// attention mask, flags that are not constants, a src that is not a 3-D float tensor, an
/// embedding that does not split into the heads): the caller then imports the op whole.
/// `args` are the op's arguments in schema order.
std::optional<std::vector<ir::Value*>> expand_encoder_layer(OpImporter& ops,
                                                            const std::vector<ImportArg>& args);

}  // namespace kiln
