// What a CompiledModule holds (kiln/kiln.h): the module as given, its options, the captured
// graph and the specializations compiled for it. Shared by the API's files, not public.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/api/module_classes.h"
#include "backend/api/signature_cache.h"
#include "backend/api/specialization.h"
#include "kiln/kiln.h"

namespace kiln {
namespace jit {
class CodeBundle;
}  // namespace jit

struct CompiledModule::Impl {
  /// The module as given; read through original_module(), which loads it at first use where
  /// `load_original` is set (a package's).
  mutable torch::jit::Module original;
  std::function<torch::jit::Module()> load_original;
  mutable std::once_flag original_loaded;
  CompileOptions options;
  CapturedModule captured;

  /// Every signature met (up to kMaxSignatures), with the specialization it runs: its own, its
  /// class's, or past max_specializations one that runs the module uncompiled.
  mutable SignatureCache<Specialization> specializations;
  static constexpr int kMaxSignatures = 4096;
  mutable ModuleClasses classes;
  mutable std::atomic<int> compiles = 0;  // signatures compiled on their own, and classes
  mutable std::atomic<bool> warned_limit = false;

  /// The input signatures compiled so far, described for a package (package.h), in order.
  mutable std::mutex signatures_mutex;
  mutable std::vector<c10::IValue> signatures;
  /// Set for a module loaded from a package: the package's code, in use on every call, so that
  /// compiles load it instead of generating code.
  std::shared_ptr<jit::CodeBundle> package_code;

  const torch::jit::Module& original_module() const;
  /// Checks the inputs against forward's schema and fills defaults; throws kiln::Error.
  void check_inputs(std::vector<c10::IValue>& inputs) const;
  /// The specialization for these inputs (past max_specializations, or where compiling failed,
  /// one that runs the module uncompiled).
  std::shared_ptr<const Specialization> specialization_for(
      const std::vector<c10::IValue>& inputs) const;
  /// The specialization of the class these inputs are a member of, one compiled for their
  /// class or signature, or (past max_specializations) one that runs the module uncompiled.
  std::shared_ptr<const Specialization> find_or_compile(
      const std::vector<c10::IValue>& inputs) const;
  std::shared_ptr<const Specialization> compile_specialization(
      int index, const std::vector<c10::IValue>& inputs) const;
  /// The specialization for the class these inputs form, or null where it fails to compile or
  /// is kept in reserve (module_classes.h).
  std::shared_ptr<const Specialization> compile_class(int index, ModuleClasses::Formed formed,
                                                      const std::vector<c10::IValue>& inputs) const;
  /// Past max_specializations: the specialization of the class these inputs are a member of (one
  /// in reserve too), else one that runs the module uncompiled.
  std::shared_ptr<const Specialization> past_limit(const std::vector<c10::IValue>& inputs) const;
  c10::IValue run(std::vector<c10::IValue> inputs) const;
  /// Compiles the specialization for these inputs; runs them only where the specialization
  /// cannot compile without running (the interpreter runs glue between its regions).
  void prepare(std::vector<c10::IValue> inputs) const;
};

/// compile() of a module nobody else holds (one just read from a package): captured without
/// copying its weights. `load_original` gives the module as saved, for original(), at first use.
CompiledModule compile_owned(const torch::jit::Module& module, const CompileOptions& options,
                             std::function<torch::jit::Module()> load_original);

/// What kiln's own files reach inside a CompiledModule through.
struct CompiledModuleAccess {
  static CompiledModule::Impl& impl(const CompiledModule& compiled) { return *compiled.impl_; }
};

}  // namespace kiln
