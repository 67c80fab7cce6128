#include "backend/capture/size_nodes.h"

#include "backend/capture/fold_metadata.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

// A constant that size arithmetic may read: a number, a list or None, or a 0-dim tensor (a
// traced `T // 4` divides by the tensor {4}). A weight is not one.
bool is_small_constant(const Value* value) {
  if (value->node()->kind() != c10::prim::Constant) return false;
  std::optional<c10::IValue> constant = torch::jit::toIValue(value);
  if (!constant) return false;
  return !constant->isTensor() || constant->toTensor().dim() == 0;
}

// What size arithmetic may produce: numbers, lists of ints, and 0-dim tensors (which only
// prim::NumToTensor and ops on its results make).
bool is_size_type(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::TensorType:
      return true;
    case c10::TypeKind::ListType:
      return type->containedType(0)->kind() == c10::TypeKind::IntType;
    default:
      return false;
  }
}

bool is_pure(const Node* node) {
  const auto kind = node->kind();
  if (kind == c10::prim::ListConstruct || kind == c10::prim::ListUnpack ||
      kind == c10::prim::NumToTensor) {
    return true;
  }
  const c10::FunctionSchema* schema = node->maybeSchema();
  return schema && !schema->is_mutable() && !node->isNondeterministic() && !node->hasSideEffects();
}

}  // namespace

bool SizeNodes::is_size_node(const Node* node) {
  if (auto found = known_.find(node); found != known_.end()) return found->second;
  const bool size_node = decide(node);
  known_[node] = size_node;
  return size_node;
}

bool SizeNodes::decide(const Node* node) {
  if (!node->blocks().empty() || node->kind() == c10::prim::Constant ||
      node->kind() == c10::prim::Param || node->outputs().empty()) {
    return false;
  }
  for (const Value* out : node->outputs())
    if (!is_size_type(out->type())) return false;
  static const c10::Symbol numel = c10::Symbol::fromQualString("aten::numel");
  const auto kind = node->kind();
  if (kind == c10::aten::dim || kind == numel || kind == c10::aten::size) {
    if (may_be_written(node->input(0))) return false;
    return node->inputs().size() == 1 || (kind == c10::aten::size && node->inputs().size() == 2 &&
                                          is_small_constant(node->input(1)));
  }
  if (!is_pure(node)) return false;
  bool reads_a_size = false, reads_a_tensor = false;
  for (const Value* in : node->inputs()) {
    reads_a_tensor |= in->type()->kind() == c10::TypeKind::TensorType;
    if (is_small_constant(in)) continue;
    if (!is_size_value(in)) return false;
    reads_a_size = true;
  }
  // A tensor it makes is a number in a 0-dim tensor, computed from those it reads: an op that
  // makes a tensor from numbers alone (arange, zeros) is an op of the region.
  const bool makes_a_tensor = std::any_of(
      node->outputs().begin(), node->outputs().end(),
      [](const Value* out) { return out->type()->kind() == c10::TypeKind::TensorType; });
  return reads_a_size && (!makes_a_tensor || reads_a_tensor || kind == c10::prim::NumToTensor);
}

}  // namespace kiln
