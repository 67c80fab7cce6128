#include "backend/capture/fold_computed_shapes.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "backend/capture/fold_metadata.h"
#include "backend/capture/partition.h"
#include "passes/base/environment.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// Whether some op may change a tensor's sizes in place: the in-place view and resize ops, and
// any op writing an argument other than its first tensor (an out= variant resizes `out`). Ops
// that write data only (fill_, copy_, index_put_: Swin's attention mask) leave sizes alone.
bool changes_sizes_in_place(const Node* node) {
  static const std::unordered_set<std::string> resizing = {"aten::resize_",
                                                           "aten::resize_as_",
                                                           "aten::_resize_output_",
                                                           "aten::set_",
                                                           "aten::as_strided_",
                                                           "aten::squeeze_",
                                                           "aten::unsqueeze_",
                                                           "aten::t_",
                                                           "aten::transpose_",
                                                           "aten::swapaxes_",
                                                           "aten::swapdims_",
                                                           "aten::sparse_resize_",
                                                           "aten::sparse_resize_and_clear_"};
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema || !schema->is_mutable()) return false;
  if (resizing.contains(schema->name())) return true;
  const auto& args = schema->arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::AliasInfo* alias = args[i].alias_info();
    if (!alias || !alias->isWrite()) continue;
    if (i != 0 || args[i].type()->kind() != c10::TypeKind::TensorType) return true;
  }
  return false;
}

const Node* find_size_change_in_place(const torch::jit::Block* block) {
  for (const Node* node : block->nodes()) {
    if (changes_sizes_in_place(node)) return node;
    for (const torch::jit::Block* inner : node->blocks())
      if (const Node* found = find_size_change_in_place(inner)) return found;
  }
  return nullptr;
}

bool reads_a_computed_shape(const torch::jit::Block* block) {
  for (const Node* node : block->nodes()) {
    const auto kind = node->kind();
    // A dtype read too: scripted `z[:, k] = 0.5` makes its 0.5 a tensor of z's dtype.
    if ((kind == c10::aten::size || kind == c10::aten::dim || kind == c10::prim::dtype) &&
        node->input(0)->node()->kind() != c10::prim::Param) {
      return true;
    }
    for (const torch::jit::Block* inner : node->blocks())
      if (reads_a_computed_shape(inner)) return true;
  }
  return false;
}

bool is_meta_tensor(const c10::IValue& value) {
  return value.isTensor() && value.toTensor().device().is_meta();
}

// Numbers, and lists of them, computed from sizes (a tensor made from a number stays: TorchScript
// constants cannot hold every tensor).
bool is_foldable_number(const c10::IValue& value) {
  return value.isInt() || value.isDouble() || value.isBool() || value.isIntList() ||
         value.isDoubleList() || value.isBoolList();
}

// What a meta run knows of each value: a meta tensor for a tensor, the value itself for a number
// or a list computed from sizes.
class MetaRun {
 public:
  /// `ranks_only`: sizes vary between the signatures the graph serves (a size-generic
  /// specialization), so no size or element count is known; ranks and dtypes still are.
  MetaRun(const torch::jit::Block* graph, bool ranks_only) : ranks_only_(ranks_only) {
    find_written(graph);
  }

  std::optional<c10::IValue> known(const Value* value) const {
    if (auto found = values_.find(value); found != values_.end()) {
      // A real tensor (a number made into one) that some op writes in place, maybe in a loop the
      // run does not enter: its value here could be stale.
      if (found->second.isTensor() && !is_meta_tensor(found->second) &&
          written_.contains(alias_root(value))) {
        return std::nullopt;
      }
      return found->second;
    }
    auto constant = torch::jit::toIValue(value);
    // A weight's shape is all the run needs; a scalar constant takes part in traced size
    // arithmetic (`channels // 2` traces to a floor_divide by a tensor constant).
    if (constant && constant->isTensor() && constant->toTensor().dim() > 0) {
      return meta_like(constant->toTensor());
    }
    return constant;
  }

  void set(const Value* value, c10::IValue known) { values_[value] = std::move(known); }

  // Runs `node` when everything it reads is known; records its outputs.
  void run(const Node* node) {
    if (!runs_on_meta(node)) return;
    if (ranks_only_ && reads_shape(node) && node->kind() != c10::aten::dim &&
        node->kind() != c10::prim::dtype) {
      return;
    }
    if (ranks_only_ && is_rank_of_sizes(node)) {  // `len(x.size())`, as F's functions ask
      const std::optional<c10::IValue> tensor = known(node->input()->node()->input(0));
      if (tensor && is_meta_tensor(*tensor)) values_[node->output()] = tensor->toTensor().dim();
      return;
    }
    torch::jit::Stack stack;
    bool reads_meta = false;
    bool reads_tensor = false;
    for (const Value* in : node->inputs()) {
      auto value = known(in);
      if (!value) return;
      reads_meta |= is_meta_tensor(*value) || is_meta_list(*value);
      reads_tensor |= value->isTensor() || value->isTensorList();
      stack.push_back(std::move(*value));
    }
    bool returns_tensor = false;
    bool returns_other = false;
    for (const Value* out : node->outputs()) {
      const bool tensor = out->type()->kind() == c10::TypeKind::TensorType;
      returns_tensor |= tensor;
      returns_other |= !tensor && !is_tensor_list(out->type());
    }
    // A meta tensor's device is meta and it never requires grad: of what it says about
    // itself, only its shape and dtype are the real tensor's.
    if (reads_meta && returns_other && !reads_shape(node)) return;
    // A factory would run for real (allocating, or on a device). A number made into a tensor is
    // the exception: traced size arithmetic is done on such tensors, and aten::Int reads it back.
    if (returns_tensor && !reads_tensor && node->kind() != c10::prim::NumToTensor) return;
    // Lists are built and taken apart here: TorchScript finds no operation for some traced
    // ones ("Schema not found for node").
    if (node->kind() == c10::prim::ListConstruct) {
      c10::impl::GenericList list(
          node->output()->type()->expectRef<c10::ListType>().getElementType());
      for (c10::IValue& value : stack)
        list.push_back(std::move(value));
      stack = {c10::IValue(std::move(list))};
    } else if (node->kind() == c10::prim::ListUnpack) {
      const auto elements = stack.at(0).toListRef().vec();
      if (elements.size() != node->outputs().size()) return;
      stack.assign(elements.begin(), elements.end());
    } else if (!run_op(node, stack,
                       // A random op run for real would draw from the user's generator
                       // (scaled_dot_product_attention counts as one: it has a dropout_p).
                       reads_meta && !returns_other && !node->isNondeterministic())) {
      log(LogLevel::Debug, std::string("computed sizes: ") + node->kind().toQualString() +
                               " ran neither on meta tensors nor on zeros; what it makes stays "
                               "unknown");
      return;
    }
    if (stack.size() != node->outputs().size()) return;
    for (size_t i = 0; i < stack.size(); ++i)
      values_[node->output(i)] = std::move(stack[i]);
  }

  const std::unordered_map<const Value*, c10::IValue>& values() const { return values_; }

 private:
  static bool is_meta_list(const c10::IValue& value) {
    if (!value.isTensorList()) return false;
    for (const at::Tensor& t : value.toTensorList())
      if (t.device().is_meta()) return true;
    return false;
  }

  // Runs the op on `stack`. An op without a meta kernel (LibTorch without Python has none for
  // relu) may run once on zeros on the CPU instead, as the importer does (import_ops.h).
  static bool run_op(const Node* node, torch::jit::Stack& stack, bool may_run_on_zeros) {
    const torch::jit::Stack inputs = stack;
    try {
      node->getOperation()(stack);
      return true;
    } catch (const std::exception&) {
      if (!may_run_on_zeros) return false;  // a value read from data: it stays unknown
    }
    stack.clear();
    for (const c10::IValue& value : inputs)
      stack.push_back(on_cpu_zeros(value));
    try {
      node->getOperation()(stack);
    } catch (const std::exception&) {
      return false;
    }
    for (c10::IValue& value : stack)
      if (value.isTensor()) value = meta_like(value.toTensor());
    return true;
  }

  static c10::IValue on_cpu_zeros(const c10::IValue& value) {
    if (is_meta_tensor(value)) {
      const at::Tensor& t = value.toTensor();
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU)).zero_();
    }
    if (is_meta_list(value)) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList())
        list.push_back(on_cpu_zeros(t).toTensor());
      return list;
    }
    return value;
  }

  // The value whose memory `value` is: back through ops that return an alias of their first
  // argument (views, in-place ops).
  static const Value* alias_root(const Value* value) {
    for (;;) {
      const Node* producer = value->node();
      const c10::FunctionSchema* schema = producer->maybeSchema();
      if (!schema || producer->inputs().empty() || schema->returns().empty() ||
          !schema->returns()[0].alias_info()) {
        return value;
      }
      value = producer->input(0);
    }
  }

  void find_written(const torch::jit::Block* block) {
    for (const Node* node : block->nodes()) {
      const c10::FunctionSchema* schema = node->maybeSchema();
      if (schema && schema->is_mutable() && !node->inputs().empty()) {
        written_.insert(alias_root(node->input(0)));
      }
      for (const torch::jit::Block* inner : node->blocks())
        find_written(inner);
    }
  }

  static bool is_tensor_list(const c10::TypePtr& type) {
    const auto list = type->cast<c10::ListType>();
    return list && list->getElementType()->kind() == c10::TypeKind::TensorType;
  }

  static bool is_rank_of_sizes(const Node* node) {
    static const c10::Symbol len = c10::Symbol::fromQualString("aten::len");
    if (node->kind() != len || node->inputs().size() != 1) return false;
    const Node* sizes = node->input()->node();
    return sizes->kind() == c10::aten::size && sizes->inputs().size() == 1;
  }

  static bool reads_shape(const Node* node) {
    static const c10::Symbol numel = c10::Symbol::fromQualString("aten::numel");
    const auto kind = node->kind();
    return kind == c10::aten::size || kind == c10::aten::dim || kind == numel ||
           kind == c10::prim::dtype;
  }

  static bool runs_on_meta(const Node* node) {
    if (!node->blocks().empty() || node->hasSideEffects()) return false;
    const c10::FunctionSchema* schema = node->maybeSchema();
    return !schema || !has_data_dependent_shape(schema->name());
  }

  std::unordered_map<const Value*, c10::IValue> values_;
  std::unordered_set<const Value*> written_;  // alias roots of what ops write in place
  bool ranks_only_;
};

// Ops whose output's rank depends on whether a size is 1: with sizes that vary, the ranks of
// what they make (and of everything after them) are not the meta run's. The run enters no
// block, so only the top level's count (what a branch makes stays unknown).
bool rank_follows_sizes(const torch::jit::Block* block) {
  return std::any_of(block->nodes().begin(), block->nodes().end(), [](const Node* node) {
    return std::string_view(node->kind().toQualString()).starts_with("aten::squeeze");
  });
}

}  // namespace

bool fold_computed_shapes(torch::jit::Graph& graph, const std::vector<c10::IValue>& inputs,
                          bool ranks_only) {
  // The run costs a pass over the graph (convolutions have no meta kernel and run on zeros):
  // only when some computed value's shape is read.
  if (!reads_a_computed_shape(graph.block())) return false;
  if (ranks_only && rank_follows_sizes(graph.block())) {
    log(LogLevel::Debug, "computed ranks stay unfolded: a squeeze's depends on the sizes");
    return false;
  }
  if (const Node* node = find_size_change_in_place(graph.block())) {
    log(LogLevel::Debug, std::string("computed sizes stay unfolded: ") +
                             node->kind().toQualString() + " may change sizes in place");
    return false;
  }
  MetaRun run(graph.block(), ranks_only);
  for (size_t i = 0; i < inputs.size() && i + 1 < graph.inputs().size(); ++i) {
    const c10::IValue& input = inputs[i];
    if (input.isTensor() && input.toTensor().defined() &&
        input.toTensor().layout() == at::kStrided) {
      run.set(graph.inputs()[i + 1], meta_like(input.toTensor()));
    }
  }
  for (const Node* node : graph.block()->nodes()) {
    if (node->kind() != c10::prim::Constant) run.run(node);
  }
  bool folded = false;
  for (const auto& [value, known] : run.values()) {
    Value* v = const_cast<Value*>(value);
    if (is_meta_tensor(known)) {
      // Sizes only: the device of a meta tensor is meta, and it never requires grad.
      const c10::IntArrayRef sizes = known.toTensor().sizes();
      std::vector<int> unknown;
      if (ranks_only) {
        for (int d = 0; d < static_cast<int>(sizes.size()); ++d)
          unknown.push_back(d);
      }
      folded |= fold_shape_reads(v, sizes, unknown);
    } else if (is_foldable_number(known) && v->node()->kind() != c10::prim::Constant) {
      folded |= replace_with_constant(v, known);
    }
  }
  return folded;
}

}  // namespace kiln
