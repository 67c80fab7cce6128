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
};

/// Clones, sets eval, freezes, inlines and cleans up. Throws kiln::Error (invalid input) for a
/// module without a forward method, and (unsupported) when TorchScript cannot freeze it.
CapturedModule capture_module(const torch::jit::Module& module);

}  // namespace kiln
