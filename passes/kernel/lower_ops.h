// How each fusible graph-IR operator becomes kernel-IR expressions. The fusers ask can_lower()
// which nodes may join a group; lower_group() calls lower_node() for each member.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// True when `node` (an elementwise, reduction or normalization op) can be part of a fusion
/// group: its op, its attributes and its dtypes are ones the lowering supports.
bool can_lower(const ir::Node& node);

/// The operators kiln generates code for (with the attributes and dtypes can_lower accepts),
/// sorted: "aten::add.Tensor", ...
std::vector<std::string> lowered_ops();

/// For a reduction or normalization node: the dimensions of its first input that it reduces
/// (sorted, non-negative); nullopt for an elementwise node.
std::optional<std::vector<int>> reduced_dims(const ir::Node& node);

/// True for a matrix product kiln computes itself as a reduction over K: aten::linear with a
/// few rows (x[M, K] with M small, e.g. batch 1), where a generated dot-product kernel beats the
/// BLAS call's fixed cost. Larger products stay with ATen's BLAS.
bool is_contraction(const ir::Node& node);

/// True for an elementwise node whose lowering computes a transcendental function (exp, log,
/// erf, tanh, sigmoid: about 20 vector instructions an element, kernel.h's OpTraits). The fusers
/// keep such a node out of a group that would recompute it for every element of a broadcast.
bool computes_transcendental(const ir::Node& node);

/// True for a reduction node whose output keeps the reduced dimensions (as size 1), and for
/// normalizations (whose output has the input's shape).
bool keeps_reduced_dims(const ir::Node& node);

/// unsqueeze, view, reshape and _unsafe_view: the views that only reshape. fuse_reductions lets
/// those that insert size-1 dims into a reduced value join its group; lower_group lowers them to
/// that value.
bool is_reshaping_view(const std::string& op);

/// The kernel dtype in which a value of this dtype is computed: float16 and bfloat16 are loaded
/// and stored as they are but computed in float32.
DType compute_dtype(DType dtype);

/// Appends the exprs computing `node` from `args` (one expr per tensor input, in order) and
/// returns the expr of its output. Reductions and normalizations reduce over the kernel's
/// reduced dimensions, which the caller has made the node's reduced dimensions.
int lower_node(KernelBuilder& builder, const ir::Node& node, const std::vector<int>& args);

}  // namespace kiln::kernel
