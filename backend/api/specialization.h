// One specialization of a compiled module: the captured graph, partitioned into regions, for one
// input signature. When the whole graph is one region the runner is called directly and the
// TorchScript interpreter is not involved at all.
#pragma once

#include <torch/csrc/jit/runtime/interpreter.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backend/api/region.h"
#include "backend/capture/capture.h"

namespace kiln {

class Specialization {
 public:
  /// `inputs` are the call's inputs: what their signature fixes (None-ness, tensor metadata,
  /// grad mode, autocast) is folded into this specialization's graph (specialize_graph.h), so
  /// `if x is None` or a module's checks of its input's dim fold away. A size-generic one (a
  /// module shape class, module_classes.h) folds no size of the `varying_dims` (per input).
  /// `name` ("spec3", "class3") names its regions in logs and dumps.
  Specialization(const CapturedModule& captured, const CompileOptions& options,
                 const std::string& name, const std::vector<c10::IValue>& inputs,
                 const std::vector<std::vector<int>>& varying_dims = {});
  ~Specialization();

  /// A specialization that runs the frozen module in the TorchScript interpreter, uncompiled;
  /// explain gives `reason`.
  static std::shared_ptr<const Specialization> uncompiled(std::string reason);

  /// Runs on the caller's inputs (without self).
  c10::IValue run(const CapturedModule& captured, std::vector<c10::IValue> inputs) const;
  /// Compiles the region for these inputs without running it, where the whole graph is one
  /// region; false otherwise (the interpreter finds its regions' inputs by running).
  bool prepare(const std::vector<c10::IValue>& inputs) const;
  void explain_into(Explanation& explanation) const;
  bool runs_without_interpreter() const { return direct_ != nullptr; }
  /// The nodes of its graph the interpreter runs: all but constants and regions (every node,
  /// counted as one, where it runs the module uncompiled).
  int interpreter_nodes() const { return interpreter_nodes_; }
  int regions() const { return static_cast<int>(runners_.size()); }

 private:
  Specialization() = default;

  // The whole graph is region + (optional) tuple of its outputs.
  struct DirectRoute {
    std::shared_ptr<RegionRunner> runner;
    std::vector<size_t>
        argument_of_input;  // region input i is forward argument argument_of_input[i]
    std::vector<size_t> returned_outputs;  // region outputs returned, in order
    bool returns_tuple = false;
  };
  std::unique_ptr<DirectRoute> find_direct_route() const;

  std::shared_ptr<torch::jit::Graph> graph_;
  std::vector<std::shared_ptr<RegionRunner>> runners_;
  std::vector<int64_t> runner_ids_;
  std::unique_ptr<DirectRoute> direct_;
  std::unique_ptr<torch::jit::Code> code_;
  std::string uncompiled_reason_;  // set: runs the frozen module uncompiled
  int interpreter_nodes_ = std::numeric_limits<int>::max();
};

}  // namespace kiln
