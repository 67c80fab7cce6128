// TorchScript capture: from a torch::jit::Module, scripted or traced, to one frozen, inlined
// TorchScript graph ready for partitioning. The module passed in is never modified.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <memory>

namespace kiln {

struct CapturedModule {
  /// An eval-mode clone with its parameters and attributes frozen into constants.
  torch::jit::Module frozen;
  /// frozen's forward, inlined and cleaned up; input 0 is `self` (unused after freezing).
  std::shared_ptr<torch::jit::Graph> graph;
  /// The forward arguments a caller passes (without self).
  std::vector<c10::Argument> arguments;
  /// Removes frozen's methods from their CompilationUnit when the last copy of this capture
  /// dies (capture.cpp says why).
  std::shared_ptr<void> methods_release;
};

/// Clones, sets eval, freezes, inlines and cleans up. Throws kiln::Error (invalid input) for a
/// module without a forward method, and (unsupported) when TorchScript cannot freeze it.
/// `share_weights`: the clone shares the module's tensors instead of copying them, for a module
/// nobody else holds (one just read from a package); otherwise a caller who later changes the
/// module's weights in place would change the frozen copy's too.
CapturedModule capture_module(const torch::jit::Module& module, bool share_weights = false);

}  // namespace kiln
