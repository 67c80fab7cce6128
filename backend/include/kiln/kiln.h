// kiln: a compiler backend for PyTorch. The C++ entry point.
//
// clang-format off
//   torch::jit::Module module = torch::jit::load("model.pt");
//   kiln::CompiledModule compiled = kiln::compile(module, kiln::CompileOptions::parse("strict=true"));
//   at::Tensor y = compiled.forward({torch::randn({8, 64})}).toTensor();
// clang-format on
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/cache.h"
#include "kiln/error.h"
#include "kiln/explain.h"
#include "kiln/options.h"
#include "kiln/profile.h"

#include "kiln/export.h"

namespace kiln {

class KILN_API CompiledModule {
 public:
  /// Runs the module on these inputs (the arguments of forward, without self). Compiles a new
  /// specialization for a new input signature; past max_specializations, runs the frozen
  /// (eval-mode) copy of the module in the TorchScript interpreter.
  c10::IValue forward(std::vector<c10::IValue> inputs) const;
  c10::IValue operator()(std::vector<c10::IValue> inputs) const {
    return forward(std::move(inputs));
  }

  /// The module as given to compile (not a copy).
  const torch::jit::Module& original() const;
  const CompileOptions& options() const;

  /// Where each operation runs for these inputs (compiling their specialization if needed).
  Explanation explain(std::vector<c10::IValue> inputs) const;
  /// Where the time of a call on these inputs goes, plan step by plan step (kiln/profile.h):
  /// one untimed call (it compiles), then `calls` profiled calls, 1 to 1000000.
  Profile profile(std::vector<c10::IValue> inputs, int calls = 20) const;
  /// Number of input signatures compiled so far.
  int num_specializations() const;

  struct Impl;
  explicit CompiledModule(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

/// Compiles a TorchScript module (scripted or traced). The module itself is not modified.
KILN_API CompiledModule compile(const torch::jit::Module& module,
                                const CompileOptions& options = {});

/// The original module and the options it was compiled with: a trainer can wrap the module
/// (DDP, FSDP) and call compile(wrapped, options) again with the same arguments.
KILN_API std::pair<torch::jit::Module, CompileOptions> unwrap(const CompiledModule& compiled);

}  // namespace kiln
