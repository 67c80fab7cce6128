// The op-by-op half of import, shared by both frontends: each op is run on meta tensors (or, for
// ops without a meta kernel, once on zeros) to get exactly the sizes, strides and dtypes ATen will
// produce, and appended to a graph IR with its non-tensor arguments as attributes. The
// TorchScript importer (import_graph.cpp) and the FX importer (bindings) feed it.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <functional>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

struct ImportedGraph {
  std::unique_ptr<ir::Graph> graph;
  /// Frozen weights: the tensor of `prim::Constant {index=i}` is constants[i].
  std::vector<at::Tensor> constants;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
};

/// One argument of an op call, in schema order: a graph value, a list of graph values (a
/// `Tensor[]` argument, or a `Tensor?[]` one whose None elements are nullptr), or a constant.
using ImportArg = std::variant<ir::Value*, std::vector<ir::Value*>, c10::IValue>;

/// Runs an op on a stack (the TorchScript node's operation, or the dispatcher's boxed call).
using RunOp = std::function<void(torch::jit::Stack&)>;

class OpImporter {
 public:
  /// Adds one graph input per tensor. Throws kiln::Error (unsupported) when the inputs live on
  /// several devices or a dtype has no IR form. `names` (optional) name the inputs in the IR.
  explicit OpImporter(const std::vector<at::Tensor>& inputs,
                      const std::vector<std::string>& names = {});

  ir::Value* input(size_t i) const { return inputs_.at(i); }
  /// A frozen tensor (a weight) as a `prim::Constant`.
  ir::Value* add_constant(const at::Tensor& tensor);
  /// Appends the op; returns its outputs. Throws kiln::Error (unsupported) when its output shapes
  /// cannot be inferred or an output is not a tensor the IR can hold. A fused transformer op is
  /// appended as its parts (expand_transformer_ops.h) unless `expand` is false.
  std::vector<ir::Value*> add_op(const c10::FunctionSchema& schema, const RunOp& run,
                                 const std::vector<ImportArg>& args, bool expand = true);
  /// An op that cuts its first argument into a list of views along its `dim` argument (split,
  /// split_with_sizes, chunk, unbind): one `aten::slice` (`aten::select` for unbind) per piece,
  /// placed from the pieces' sizes in a meta run. A list cannot be a graph IR value; slices can.
  std::vector<ir::Value*> add_pieces(const c10::FunctionSchema& schema, const RunOp& run,
                                     const std::vector<ImportArg>& args);
  void add_output(ir::Value* value);
  ImportedGraph finish();
  /// A value's meta tensor: its exact sizes, strides and dtype.
  const at::Tensor& meta(const ir::Value* value) const { return meta_.at(value); }

 private:
  ir::TensorType type_of(const at::Tensor& t, const std::string& what) const;
  c10::IValue meta_of(const ImportArg& arg, const c10::Argument& formal) const;
  c10::IValue materialize(const c10::IValue& value) const;

  ImportedGraph result_;
  std::vector<ir::Value*> inputs_;
  std::unordered_map<const ir::Value*, at::Tensor> meta_;
};

}  // namespace kiln
