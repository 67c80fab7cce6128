// Import: a TorchScript region (a subgraph of dispatcher ops, see partition.h) and the tensors it
// is called with become a graph IR with static types. Types come from running each op on meta
// tensors, so they are exactly the sizes, strides and dtypes ATen will produce.
#pragma once

#include <ATen/Tensor.h>
#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

struct ImportedGraph {
  std::unique_ptr<ir::Graph> graph;
  /// Frozen weights: the tensor of `prim::Constant {index=i}` is constants[i].
  std::vector<at::Tensor> constants;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
};

/// Throws kiln::Error (unsupported) when a type has no IR form, the inputs live on several
/// devices, or an op cannot run on meta tensors (data-dependent shapes).
ImportedGraph import_region(const torch::jit::Graph& region, const std::vector<at::Tensor>& inputs);

}  // namespace kiln
