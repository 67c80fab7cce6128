// The op table: the operators kiln understands. The importers, the verifier, the planner and
// `explain` read it; an operator that is not here is an extern op, run through ATen's
// dispatcher with its own schema, so nothing is lost.
#pragma once

#include <string>
#include <string_view>

namespace kiln::ir {

enum class OpKind {
  Constant,       // prim::Constant: a frozen weight
  Elementwise,    // pointwise with broadcasting and type promotion
  Reduction,      // sum, mean, amax over dims
  Normalization,  // softmax, log_softmax, layer_norm, batch_norm
  Gemm,           // linear, matmul, mm, addmm, bmm
  Convolution,    // conv2d
  Pooling,        // max_pool2d, adaptive_avg_pool2d
  View,           // the output aliases the first input (view, permute, expand, ...)
  Copy,           // a fresh tensor from existing data (contiguous, cat, casts)
};

struct OpInfo {
  std::string_view name;  // ATen's name with overload, e.g. "aten::add.Tensor"
  OpKind kind;
  int min_inputs;  // tensor inputs
  int max_inputs;  // -1: any number (a Tensor[] argument)
  int num_outputs;
  /// The runtime may call ATen's out= variant of this overload to write into a planned buffer.
  bool writes_to_planned_buffer;
};

/// The entry for an operator name, or null when kiln does not know it (an extern op).
const OpInfo* find_op(std::string_view name);
const char* op_kind_name(OpKind kind);

/// True for a name of the form "namespace::name" or "namespace::name.overload".
bool is_qualified_op_name(std::string_view name);

}  // namespace kiln::ir
