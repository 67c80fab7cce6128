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
  /// specialization for a new input signature, or, for one that differs from an earlier one only
  /// in some sizes, one shape class for every size of them (docs/shape-classes.md); past
  /// max_specializations, runs the frozen (eval-mode) copy of the module in the TorchScript
  /// interpreter.
  c10::IValue forward(std::vector<c10::IValue> inputs) const;
  c10::IValue operator()(std::vector<c10::IValue> inputs) const {
    return forward(std::move(inputs));
  }

  /// The module as given to compile (not a copy). For a module from a package (load), read
  /// from the package at the first call of original(): running it needs only the frozen copy.
  const torch::jit::Module& original() const;
  const CompileOptions& options() const;
  /// forward's schema (its first argument is the module itself), without reading original().
  const c10::FunctionSchema& forward_schema() const;

  /// Where each operation runs for these inputs (compiling their specialization if needed).
  Explanation explain(std::vector<c10::IValue> inputs) const;
  /// Where the time of a call on these inputs goes, plan step by plan step (kiln/profile.h):
  /// one untimed call (it compiles), then `calls` profiled calls, 1 to 1000000.
  Profile profile(std::vector<c10::IValue> inputs, int calls = 20) const;
  /// Number of compiles so far: input signatures compiled on their own, and shape classes.
  int num_specializations() const;

  struct Impl;
  explicit CompiledModule(std::shared_ptr<Impl> impl);

 private:
  friend struct CompiledModuleAccess;  // kiln's own files (backend/api/compiled_module_impl.h)
  std::shared_ptr<Impl> impl_;
};

/// Compiles a TorchScript module (scripted or traced). The module itself is not modified.
KILN_API CompiledModule compile(const torch::jit::Module& module,
                                const CompileOptions& options = {});

/// The original module and the options it was compiled with: a trainer can wrap the module
/// (DDP, FSDP) and call compile(wrapped, options) again with the same arguments.
KILN_API std::pair<torch::jit::Module, CompileOptions> unwrap(const CompiledModule& compiled);

/// Writes `compiled` to `path` as one file (a package): the module, its options, the input
/// signatures it has compiled so far, and their machine code for this CPU and this kiln build.
/// Call it after the first call, or compile with example_inputs. Throws Error(InvalidInput)
/// if the file cannot be written.
KILN_API void save(const CompiledModule& compiled, const std::string& path);

/// The module a package holds, compiled with its options, its signatures compiled already: from
/// the package's code where the CPU and kiln build are those it was saved with (no code is
/// generated), else compiled here, with one warning. Throws Error(InvalidInput) for a file that
/// is not a package, of another format, truncated or corrupt.
KILN_API CompiledModule load(const std::string& path);

}  // namespace kiln
