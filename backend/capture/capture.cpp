#include "backend/capture/capture.h"

#include <algorithm>

#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_dropout.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include "backend/capture/fresh_returns.h"
#include "backend/capture/functionalize_owned.h"
#include "backend/capture/keep_none_checks.h"
#include "kiln/error.h"
#include "passes/base/environment.h"

namespace kiln {
namespace {

// Removes `types`' methods from their CompilationUnit. Each is a class type of a clone kiln
// made, which nothing else reads.
void remove_methods(const std::vector<c10::ClassTypePtr>& types) noexcept {
  try {
    for (const c10::ClassTypePtr& type : types) {
      const std::shared_ptr<torch::jit::CompilationUnit> unit = type->compilation_unit();
      std::vector<std::string> names;
      for (const torch::jit::Function* method : type->methods())
        names.push_back(method->name());
      for (const std::string& name : names) {
        type->unsafeRemoveMethod(name);
        const c10::QualifiedName qualified(*type->name(), name);
        if (unit && unit->find_function(qualified)) unit->unsafeRemoveMethod(qualified);
      }
    }
  } catch (const std::exception&) {
    // A method left behind costs memory, not correctness.
  }
}

// The class types of `module` and its submodules, each once.
std::vector<c10::ClassTypePtr> types_of(const torch::jit::Module& module) {
  std::vector<c10::ClassTypePtr> types;
  for (const torch::jit::Module& part : module.modules()) {
    if (std::find(types.begin(), types.end(), part.type()) == types.end())
      types.push_back(part.type());
  }
  return types;
}

// Cloning and freezing register new class types in the module's CompilationUnit (for a module
// from Python, the process-wide one), which TorchScript never removes: the clone's (a copy of
// every method of every submodule) and the frozen clone's, the graphs of whose methods hold the
// weights as constants. So each compile kept a copy of the model's weights alive after its
// CompiledModule died (torch.jit.freeze alone does the same: a traced ResNet-18 frozen and
// dropped in a loop grew by 56 MB a round). The clone's methods go once it is frozen; the
// frozen clone's when the last copy of the capture does.
std::shared_ptr<void> release_methods_of(const torch::jit::Module& frozen) {
  return std::shared_ptr<void>(nullptr,
                               [types = types_of(frozen)](void*) { remove_methods(types); });
}

}  // namespace

CapturedModule capture_module(const torch::jit::Module& module, bool share_weights) {
  if (!module.find_method("forward")) {
    throw Error(ErrorKind::InvalidInput, "the module has no forward method to compile");
  }
  CapturedModule captured;
  const DebugClock clock("capture");
  // Freezing folds what depends on attributes alone (`self.table.clone()`): which returns the
  // forward computes is read before it.
  std::vector<ReturnPath> computed;
  {
    auto forward = module.get_method("forward").graph()->copy();
    torch::jit::Inline(*forward);
    computed = computed_returns(*forward);
  }
  try {
    torch::jit::Module copy = module.clone(/*inplace=*/share_weights);
    clock.step("cloned");
    copy.eval();
    captured.frozen = torch::jit::freeze_module(copy);
    captured.methods_release = release_methods_of(captured.frozen);
    remove_methods(types_of(copy));
    clock.step("frozen");
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::Unsupported, std::string("TorchScript could not freeze the module: ") +
                                            e.what_without_backtrace());
  }

  auto graph = captured.frozen.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  // In-place ops on fresh intermediates become functional, so they can join compiled regions.
  // TorchScript's pass leaves those whose results are written again or viewed, and would make
  // `y += d` an add that promotes y's dtype: functionalize_owned takes those at the top level
  // (inside loops and branches, which it does not rewrite, TorchScript's pass still does).
  torch::jit::RemoveTensorMutation(graph, [&](torch::jit::Node* n) {
    return n->owningBlock() != graph->block() || !promotes_when_functional(*n);
  });
  functionalize_owned(graph);
  torch::jit::LowerSimpleTuples(graph);
  keep_none_checks(*graph);
  torch::jit::PeepholeOptimize(graph, /*disable_shape_peepholes=*/true);
  torch::jit::ConstantPropagation(graph);
  // The module is captured in eval mode: dropout is the identity. An in-place one (traced
  // EfficientNet's `dropout_`) would otherwise stay in the interpreter between two regions.
  torch::jit::removeDropout(graph);
  torch::jit::ConstantPooling(graph);
  clone_folded_returns(*graph, computed);
  torch::jit::EliminateDeadCode(graph);
  captured.graph = graph;
  clock.step("graph passes");

  const auto& args = captured.frozen.get_method("forward").function().getSchema().arguments();
  captured.arguments.assign(args.begin() + 1, args.end());  // drop self
  return captured;
}

}  // namespace kiln
