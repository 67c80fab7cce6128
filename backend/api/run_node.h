// Single ops run through ATen at compile time, for the passes that need a real result: the
// constant folder's evaluator and the layout pass's type inference.
#pragma once

#include <ATen/Tensor.h>

#include <optional>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

/// fold_constants' evaluator: `node` on constant tensors, as a tensor of exactly the type the
/// graph gives its output (a oneDNN-layout weight stays opaque).
at::Tensor evaluate_node(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                         c10::Device device);

/// assign_layout's type inference: the types `node` really returns for inputs of `types`, from a
/// run on zeros on the device; nullopt when it cannot run so.
std::optional<std::vector<ir::TensorType>> infer_types(const ir::Node& node,
                                                       const std::vector<ir::TensorType>& types,
                                                       c10::Device device);

}  // namespace kiln
