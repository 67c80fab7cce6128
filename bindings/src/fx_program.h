// An FX graph (core ATen ops, as torch.compile hands it over after AOTAutograd) as kiln sees it:
// a list of dispatcher calls whose arguments are graph values or constants. Built from Python one
// call at a time (kiln/_fx.py), imported into the graph IR per input signature, and run by a
// RegionRunner whose fallback is the FX graph itself, run eagerly.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/api/region.h"
#include "backend/capture/size_expression.h"

namespace kiln::python {

class FxProgram {
 public:
  static constexpr int64_t kNoneRef = -1;  // a None element of a Tensor?[] argument

  explicit FxProgram(int64_t num_inputs) : num_inputs_(num_inputs), next_ref_(num_inputs) {}

  /// A tensor the graph reads as a constant (a get_attr); returns its reference.
  int64_t constant(const at::Tensor& tensor);
  /// Appends a call of `op` ("aten::add.Tensor"). `args` has one entry per schema argument:
  /// ("ref", id), ("refs", [ids]) for a Tensor[] argument (or a Tensor?[] one, whose None
  /// elements are None), ("const", value), ("default", None), or a size computed from the sizes
  /// of graph values: ("size", program) for an int argument, ("sizes", [program, ...]) for an
  /// int[] one (SizeExpression). Returns the references of its outputs. Throws kiln::Error
  /// (unsupported) for ops and arguments kiln cannot compile.
  std::vector<int64_t> call(const std::string& op, const pybind11::list& args);
  void set_outputs(std::vector<int64_t> outputs) { outputs_ = std::move(outputs); }

  /// The region for these inputs; those at `frozen` become constants (frozen weights).
  ImportedGraph import(const Tensors& inputs, const std::vector<size_t>& frozen) const;
  int64_t num_inputs() const { return num_inputs_; }
  std::vector<std::string> op_names() const;

 private:
  /// An int or int[] argument given as expressions (one for an int).
  struct Sizes {
    std::vector<SizeExpression> items;
    bool is_list;
  };
  using Arg = std::variant<int64_t, std::vector<int64_t>, c10::IValue, Sizes>;
  struct Call {
    c10::OperatorHandle op;
    std::vector<Arg> args;
    std::vector<int64_t> outputs;
  };
  int64_t checked_ref(int64_t ref) const;
  SizeExpression size_expression(const pybind11::handle& program, const std::string& what) const;

  int64_t num_inputs_;
  int64_t next_ref_;
  std::vector<std::pair<int64_t, at::Tensor>> constants_;
  std::vector<Call> calls_;
  std::vector<int64_t> outputs_;
};

/// Why kiln cannot compile `op` ("aten::add.Tensor") in any FX region, or nullopt.
std::optional<std::string> operator_problem(const std::string& op);

/// A region over `program` whose fallback calls `fallback(*inputs)` (the FX graph, eagerly);
/// `weights` are the inputs that are the model's parameters and buffers (RegionSource).
std::shared_ptr<RegionRunner> make_fx_region(std::shared_ptr<const FxProgram> program,
                                             const CompileOptions& options, const std::string& name,
                                             pybind11::object fallback,
                                             std::vector<size_t> weights = {});

}  // namespace kiln::python
