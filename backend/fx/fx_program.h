// An FX graph (core ATen ops, as torch.compile hands it over after AOTAutograd) as kiln sees it:
// a list of dispatcher calls whose arguments are graph values, constants or size expressions.
// Built one call at a time by the Python extension (bindings/src/fx_program.cpp decodes Python's
// arguments), imported into the graph IR per input signature (OpImporter, as the TorchScript
// frontend does), and run by a RegionRunner whose fallback is the FX graph itself, run eagerly.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/capture/import_ops.h"
#include "backend/capture/size_expression.h"
#include "passes/base/export.h"

namespace kiln {

/// The dispatcher's operator "aten::add.Tensor" (or "aten::relu", the default overload); throws
/// kiln::Error (unsupported) when there is none.
KILN_INTERNAL c10::OperatorHandle find_operator(const std::string& op);

/// Why kiln cannot compile this operator ("aten::add.Tensor"), or nullopt.
KILN_INTERNAL std::optional<std::string> operator_problem(const std::string& op);

class KILN_INTERNAL FxProgram {
 public:
  static constexpr int64_t kNoneRef = -1;  // a None element of a Tensor?[] argument

  /// A size argument: one expression of the region's input sizes, or a list of them.
  struct Sizes {
    std::vector<SizeExpression> items;
    bool is_list;
  };
  /// A reference (Tensor), a list of them (Tensor[], Tensor?[]), a constant, or sizes.
  using Arg = std::variant<int64_t, std::vector<int64_t>, c10::IValue, Sizes>;

  explicit FxProgram(int64_t num_inputs) : num_inputs_(num_inputs), next_ref_(num_inputs) {}

  /// A tensor the graph holds (a buffer or a lifted constant); returns its reference.
  int64_t constant(const at::Tensor& tensor);
  /// `ref` when it names an input, a constant or an earlier call's output; else throws.
  int64_t checked_ref(int64_t ref) const;
  /// Appends a call of `op` with one argument per formal of its schema; returns the references of
  /// its outputs.
  std::vector<int64_t> call(const c10::OperatorHandle& op, std::vector<Arg> args);
  void set_outputs(std::vector<int64_t> outputs) { outputs_ = std::move(outputs); }

  /// The graph IR for these inputs (sizes evaluated, frozen weights as constants).
  ImportedGraph import(const std::vector<at::Tensor>& inputs,
                       const std::vector<size_t>& frozen) const;
  int64_t num_inputs() const { return num_inputs_; }
  std::vector<std::string> op_names() const;

 private:
  struct Call {
    c10::OperatorHandle op;
    std::vector<Arg> args;
    std::vector<int64_t> outputs;
  };

  int64_t num_inputs_;
  int64_t next_ref_;
  std::vector<std::pair<int64_t, at::Tensor>> constants_;
  std::vector<Call> calls_;
  std::vector<int64_t> outputs_;
};

}  // namespace kiln
