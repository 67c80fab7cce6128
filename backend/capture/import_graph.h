// Import: a TorchScript region (a subgraph of dispatcher ops, see partition.h) and the tensors it
// is called with become a graph IR with static types (through OpImporter, import_ops.h).
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

#include "backend/capture/import_ops.h"

namespace kiln {

/// Throws kiln::Error (unsupported) when a type has no IR form, the inputs live on several
/// devices, or an op cannot run on meta tensors (data-dependent shapes).
ImportedGraph import_region(const torch::jit::Graph& region, const std::vector<at::Tensor>& inputs);

}  // namespace kiln
