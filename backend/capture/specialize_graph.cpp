#include "backend/capture/specialize_graph.h"

#include "backend/capture/fold_computed_shapes.h"
#include "backend/capture/fold_devices.h"
#include "backend/capture/fold_metadata.h"
#include "backend/capture/fresh_returns.h"
#include "backend/capture/keep_none_checks.h"
#include "backend/capture/snapshot_lists.h"
#include "backend/capture/unpack_constant_lists.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

void for_each_node(torch::jit::Block* block, const std::function<void(Node*)>& visit) {
  for (Node* node : block->nodes()) {
    visit(node);
    for (torch::jit::Block* inner : node->blocks())
      for_each_node(inner, visit);
  }
}

bool fold_inputs(torch::jit::Graph& graph, const std::vector<c10::IValue>& inputs,
                 const std::vector<std::vector<int>>& unknown_dims) {
  bool folded = false;
  for (size_t i = 0; i < inputs.size() && i + 1 < graph.inputs().size(); ++i) {
    Value* input = graph.inputs()[i + 1];  // input 0 is self
    if (input->uses().empty()) continue;
    if (inputs[i].isNone()) {
      torch::jit::WithInsertPoint guard(graph.block()->nodes().front());
      input->replaceAllUsesWith(graph.insertConstant(c10::IValue()));
      folded = true;
    } else if (inputs[i].isTensor() && inputs[i].toTensor().defined() && !may_be_written(input)) {
      folded |= fold_metadata(input, inputs[i].toTensor(),
                              i < unknown_dims.size() ? unknown_dims[i] : std::vector<int>{});
    }
  }
  return folded;
}

// Grad mode and the autocast states are in the signature (signature.cpp). Dead code elimination
// keeps these ops (their schemas do not say they are pure), so the folded ones are removed here.
void fold_global_state(torch::jit::Graph& graph) {
  std::vector<Node*> folded;
  for_each_node(graph.block(), [&](Node* node) {
    if (!node->inputs().empty() || node->outputs().size() != 1) return;
    const std::string name = node->kind().toQualString();
    std::optional<bool> state;
    if (name == "aten::is_grad_enabled") state = at::GradMode::is_enabled();
    if (name == "aten::is_autocast_enabled") state = at::autocast::is_autocast_enabled(at::kCUDA);
    if (name == "aten::is_autocast_cpu_enabled")
      state = at::autocast::is_autocast_enabled(at::kCPU);
    if (!state) return;
    replace_with_constant(node->output(), *state);
    folded.push_back(node);
  });
  for (Node* node : folded)
    node->destroy();
}

// `a is a` and `a is not a` on one value: nn.MultiheadAttention's fast-path check `query is not
// key` on self-attention, scripted. Returns whether it folded one.
bool fold_identity_checks(torch::jit::Graph& graph) {
  std::vector<Node*> folded;
  for_each_node(graph.block(), [&](Node* node) {
    const bool is = node->kind() == c10::aten::__is__;
    if ((!is && node->kind() != c10::aten::__isnot__) || node->inputs().size() != 2 ||
        node->input(0) != node->input(1)) {
      return;
    }
    replace_with_constant(node->output(), is);
    folded.push_back(node);
  });
  for (Node* node : folded)
    node->destroy();
  return !folded.empty();
}

// Values of these types cannot change in place (numbers, strings, devices, None, and optionals
// and tuples of them); anything else read from the module might (a tensor, a list).
bool is_immutable(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::ComplexType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::DeviceObjType:
    case c10::TypeKind::NoneType:
      return true;
    case c10::TypeKind::OptionalType:
    case c10::TypeKind::TupleType:
      for (const c10::TypePtr& contained : type->containedTypes())
        if (!is_immutable(contained)) return false;
      return true;
    default:
      return false;
  }
}

// prim::GetAttr chains from self, evaluated on the frozen module: only when the forward neither
// sets an attribute nor hands one that could change in place to an op that might change it.
void fold_attributes(torch::jit::Graph& graph, const torch::jit::Module& self) {
  bool mutable_attributes = false;
  std::vector<Node*> reads;
  for_each_node(graph.block(), [&](Node* node) {
    if (node->kind() == c10::prim::SetAttr) mutable_attributes = true;
    if (node->kind() == c10::prim::GetAttr) {
      reads.push_back(node);
      const c10::TypePtr& type = node->output()->type();
      if (!type->cast<c10::ClassType>() && !is_immutable(type) && may_be_written(node->output()))
        mutable_attributes = true;
    }
  });
  if (mutable_attributes) return;
  std::unordered_map<const Value*, c10::IValue> objects{{graph.inputs()[0], self._ivalue()}};
  for (Node* node : reads) {  // in program order: an object's read comes before its attributes'
    auto owner = objects.find(node->input());
    if (owner == objects.end() || !owner->second.isObject()) continue;
    const std::string& name = node->s(c10::attr::name);
    const auto& object = owner->second.toObject();
    if (!object->type()->hasAttribute(name)) continue;
    c10::IValue value = object->getAttr(name);
    if (value.isObject()) {
      objects.emplace(node->output(), value);
    } else if (value.isTensor() && value.toTensor().requires_grad()) {
      fold_metadata(node->output(), value.toTensor());  // TorchScript has no such constants
    } else {
      replace_with_constant(node->output(), value);
    }
  }
}

}  // namespace

void specialize_graph(std::shared_ptr<torch::jit::Graph>& graph, const torch::jit::Module& self,
                      const std::vector<c10::IValue>& inputs,
                      const std::vector<std::vector<int>>& unknown_dims) {
  const std::vector<ReturnPath> computed = computed_returns(*graph);
  fold_inputs(*graph, inputs, unknown_dims);
  fold_global_state(*graph);
  fold_attributes(*graph, self);
  // Folded branches leave lists built by appends and loops over them (`any(x.requires_grad for
  // x in ...)`): make those plain, unroll the constant loops, fold again, sizes of computed
  // values too.
  // The meta run of fold_computed_shapes costs a pass over the graph (convolutions on zeros):
  // once it finds nothing to fold, later rounds run it only after another fold changed the graph.
  // Where some input sizes vary, so may every computed value's: only their ranks fold.
  const bool ranks_only = std::any_of(unknown_dims.begin(), unknown_dims.end(),
                                      [](const std::vector<int>& dims) { return !dims.empty(); });
  bool fold_shapes = true;
  for (int round = 0; round < 32; ++round) {
    bool changed = torch::jit::ConstantPropagation(graph);
    changed |= torch::jit::RemoveListMutation(graph);
    changed |= snapshot_lists(*graph) > 0;
    changed |= fold_identity_checks(*graph);
    changed |= fold_cpu_devices(*graph, inputs);
    // A branch that folded away leaves the tuple it returned built and taken apart at once.
    torch::jit::LowerSimpleTuples(graph);
    changed |= torch::jit::UnrollConstantLoops(graph);
    keep_none_checks(*graph);
    changed |= torch::jit::PeepholeOptimize(graph, /*disable_shape_peepholes=*/true);
    // Other folds of this round may have made new sizes known (a branch inlined, a list made
    // plain): the run is tried again after them.
    if (fold_shapes || changed) {
      fold_shapes = fold_computed_shapes(*graph, inputs, ranks_only);
      changed |= fold_shapes;
    }
    // Again: a read whose dim is computed (`x.size(x.dim() - 3)`) folds once the dim is a
    // constant.
    changed |= fold_inputs(*graph, inputs, unknown_dims);
    if (!changed) break;
  }
  clone_folded_returns(*graph, computed);
  unpack_constant_lists(*graph);
  torch::jit::EliminateDeadCode(graph);
  // Folds insert their constants where the value was read; the partitioner moves size arithmetic
  // below a region, which must not move it above a constant it reads.
  torch::jit::ConstantPooling(graph);
}

}  // namespace kiln
