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
/// run on zeros on the device (types_from_small_batches where it answers); nullopt when it cannot
/// run so.
std::optional<std::vector<ir::TensorType>> infer_types(const ir::Node& node,
                                                       const std::vector<ir::TensorType>& types,
                                                       c10::Device device);

/// The types `node` returns at the batch of its first input (8 or more), from runs on zeros at
/// batches of 2 and 3: where every input and output leading with that batch holds it as its
/// outermost dim, both runs give the outputs the graph declares but for that dim, and their
/// strides agree. nullopt otherwise: an attribute holds the batch (a view's shape), a weight
/// leads with the same count, a stride follows the batch.
std::optional<std::vector<ir::TensorType>> types_from_small_batches(
    const ir::Node& node, const std::vector<ir::TensorType>& types, c10::Device device);

}  // namespace kiln
