// One definition per fusible graph op: its lowering to kernel IR, the attributes and dtypes the
// lowering models, and which dims it reduces. The definitions live in per-family files
// (passes/kernel/ops/: arithmetic, activations, selection, reductions, normalizations), each next
// to its lowering; lower_ops.cpp reads them and nothing else lists fusible ops. The op's kind,
// arity and planned-buffer rule are the graph IR's (passes/ir/op_table.cpp, which also covers
// the ops kiln never lowers); a test checks that every definition has its row there.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/kernel/lowering.h"

namespace kiln::kernel {

/// The dims of its first input a reduction or normalization reduces.
enum class ReducedDims {
  None,             // elementwise
  All,              // every dim (x.sum(), x.var())
  DimAttr,          // its `dim` attribute: an int, or a list (empty or absent: every dim)
  NormalizedShape,  // the trailing dims `normalized_shape` names (layer_norm)
  LastDim,          // K, the last dim of x (a linear computed as a contraction)
};

struct OpLowering {
  std::string_view name;  // ATen's name with overload, "aten::add.Tensor"
  std::function<int(lowering::Lowering&)> lower;
  /// The attributes and dtypes the lowering models, beyond the rules every op shares (no complex
  /// dtypes, one output, not on the meta device); null: all of them.
  std::function<bool(const ir::Node&)> supports = nullptr;
  ReducedDims reduced = ReducedDims::None;
  /// An elementwise op whose output may be bool (comparisons, where, casts). For the others,
  /// arithmetic on bool tensors means logic in ATen, which keeps them.
  bool bool_output = false;
};

using OpFamily = std::vector<OpLowering>;

OpFamily arithmetic_ops();     // + - * /, unary math, pow, maximum, minimum, sign
OpFamily activation_ops();     // relu, gelu, sigmoid, tanh, the hard and smooth ones, clamps
OpFamily selection_ops();      // where, comparisons, casts and copies
OpFamily reduction_ops();      // sum, mean, amax, amin, var, std, and linear as a contraction
OpFamily normalization_ops();  // softmax, log_softmax, layer_norm

/// The definition for `op`, or null when kiln does not fuse it.
const OpLowering* find_op_lowering(std::string_view op);

/// Every definition, sorted by name.
std::vector<const OpLowering*> op_lowerings();

/// Supports-rules several families share.
bool float_output(const ir::Node& node);

}  // namespace kiln::kernel
