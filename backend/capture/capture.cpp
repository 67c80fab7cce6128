#include "backend/capture/capture.h"

#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/frozen_conv_folding.h>
#include <torch/csrc/jit/passes/frozen_ops_to_mkldnn.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include "backend/api/environment.h"
#include "kiln/error.h"

namespace kiln {

namespace {

bool has_convolution(const torch::jit::Graph& graph) {
  for (const torch::jit::Node* node : graph.nodes()) {
    const auto kind = node->kind();
    if (kind == c10::aten::conv2d || kind == c10::aten::_convolution ||
        kind == c10::aten::convolution) {
      return true;
    }
  }
  return false;
}

// Weight prepacking for convolutional models: batch norms, adds and scales folded into the
// convolutions (on the frozen weights), then convolutions and the ops around them converted to
// oneDNN's layout with weights reordered once, here, instead of on every call. These are
// TorchScript's own passes (what torch.jit.optimize_for_inference runs); the oneDNN ops they make
// stay in the interpreter, and kiln compiles the regions between them.
void prepack_weights(std::shared_ptr<torch::jit::Graph>& graph) {
  if (!has_convolution(*graph) || environment().disabled.contains("prepack_weights")) return;
  torch::jit::FoldFrozenConvBatchnorm(graph);
  torch::jit::FoldFrozenConvAddOrSub(graph);
  torch::jit::FoldFrozenConvMulOrDiv(graph);
  torch::jit::ConvertFrozenOpsToMKLDNN(graph);
  torch::jit::EliminateDeadCode(graph);
}

}  // namespace

CapturedModule capture_module(const torch::jit::Module& module) {
  if (!module.find_method("forward")) {
    throw Error(ErrorKind::InvalidInput, "the module has no forward method to compile");
  }
  CapturedModule captured;
  try {
    torch::jit::Module copy = module.clone();
    copy.eval();
    captured.frozen = torch::jit::freeze_module(copy);
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::Unsupported, std::string("TorchScript could not freeze the module: ") +
                                            e.what_without_backtrace());
  }

  auto graph = captured.frozen.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);
  // In-place ops on fresh intermediates become functional, so they can join compiled regions.
  torch::jit::RemoveTensorMutation(graph);
  torch::jit::LowerSimpleTuples(graph);
  torch::jit::PeepholeOptimize(graph, /*disable_shape_peepholes=*/true);
  torch::jit::ConstantPropagation(graph);
  torch::jit::ConstantPooling(graph);
  torch::jit::EliminateDeadCode(graph);
  prepack_weights(graph);
  captured.graph = graph;

  const auto& args = captured.frozen.get_method("forward").function().getSchema().arguments();
  captured.arguments.assign(args.begin() + 1, args.end());  // drop self
  return captured;
}

}  // namespace kiln
