// Compiled regions. A RegionRunner owns one region's subgraph and compiles it per input
// signature (import -> pass pipeline -> plan), then runs the plan. A region that fails to compile
// runs its subgraph in the TorchScript interpreter, with one warning (strict: an error).
#pragma once

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/api/compile_graph.h"
#include "backend/api/signature.h"
#include "kiln/kiln.h"
#include "runtime/plan.h"

namespace kiln {

/// Imports `region` for these inputs, runs the pass pipeline and builds the plan.
std::shared_ptr<const CompiledRegion> compile_region(const torch::jit::Graph& region,
                                                     const std::vector<at::Tensor>& inputs,
                                                     const CompileOptions& options,
                                                     const std::string& name);

class RegionRunner {
 public:
  RegionRunner(std::shared_ptr<torch::jit::Graph> region, CompileOptions options, std::string name);

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;
  /// Adds the entries of the specialization that ran last (nothing if it never ran).
  void explain_into(Explanation& explanation) const;
  const torch::jit::Graph& graph() const { return *region_; }

 private:
  struct Specialization {
    std::shared_ptr<const CompiledRegion> compiled;  // null: runs in the interpreter
    std::string failure;                             // why it was not compiled
  };
  std::shared_ptr<const Specialization> specialize(const std::vector<at::Tensor>& inputs) const;
  /// Records the specialization that ran last, for explain.
  std::shared_ptr<const Specialization> remember(std::shared_ptr<const Specialization> spec) const;
  std::vector<at::Tensor> interpret(const std::vector<at::Tensor>& inputs) const;

  std::shared_ptr<torch::jit::Graph> region_;
  CompileOptions options_;
  std::string name_;
  torch::jit::Code fallback_;
  mutable std::shared_mutex mutex_;
  mutable std::unordered_map<SignatureKey, std::shared_ptr<const Specialization>, SignatureHash>
      cache_;
  mutable std::mutex last_mutex_;
  mutable std::shared_ptr<const Specialization> last_;
  mutable bool warned_limit_ = false;
};

/// Makes `runner` reachable from kiln::Region nodes whose attribute region_id is the result.
int64_t register_region_runner(std::shared_ptr<RegionRunner> runner);
void unregister_region_runner(int64_t id);
c10::Symbol region_id_attr();

}  // namespace kiln
