// Partitioning a TorchScript graph into regions kiln compiles and nodes the TorchScript
// interpreter keeps.
//
// A node can join a region when it is a dispatcher operator that returns only tensors, mutates
// nothing, and whose non-tensor arguments are all constants or size arithmetic (size_nodes.h: the
// region computes its own copy), or a split unpacked into its pieces. Everything else (control
// flow, lists, in-place ops, unknown views) stays in the interpreter, and so does size arithmetic
// that the interpreter reads. Each region
// becomes one `kiln::Region` node holding its nodes as a subgraph (attribute Subgraph); the
// compile driver attaches a runner to it.
//
//   %y = aten::relu(%x)                   %y, %z = kiln::Region(%x)
//   %n = aten::size(%y, 0)        ==>      %n = aten::size(%y, 0)
//   %z = aten::exp(%x)
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>

#include "backend/capture/size_nodes.h"

namespace kiln {

/// The node kind of a compiled region.
c10::Symbol region_symbol();

/// Why an operator can never join a region (it mutates, returns non-tensors or unknown views, has
/// data-dependent shapes, is not a dispatcher op), or nullopt. Both frontends use it.
std::optional<std::string> schema_problem(const c10::FunctionSchema& schema);

/// A split of a tensor into a list (aten::split, split_with_sizes, chunk, unbind) with constant
/// arguments whose list goes straight to a prim::ListUnpack: the pair joins a region, where the
/// importer turns each piece into a slice (prim::ConstantChunk, a traced chunk, joins too).
bool is_split_op(const torch::jit::Node* node);

/// ATen ops whose output shape depends on the values of their inputs ("aten::nonzero").
bool has_data_dependent_shape(const std::string& name);

/// Why this node stays in the interpreter, or nullopt when it can join a region. `sizes`
/// remembers which nodes are size arithmetic, for callers that ask of many nodes.
std::optional<std::string> interpreter_reason(const torch::jit::Node* node);
std::optional<std::string> interpreter_reason(const torch::jit::Node* node, SizeNodes& sizes);

/// Replaces the regions of every block of `graph` (nested blocks too) by kiln::Region nodes.
/// Returns the number of regions formed.
int partition_into_regions(torch::jit::Graph& graph);

}  // namespace kiln
