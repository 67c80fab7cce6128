#include "backend/capture/fold_devices.h"

#include <torch/csrc/jit/ir/constants.h>

#include <string_view>

#include "backend/capture/fold_metadata.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

bool is_device_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::DeviceObjType) return true;
  const auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::DeviceObjType;
}

// A device argument that keeps a tensor on the CPU: None, a CPU constant, or another tensor's
// device (on the CPU, by the same reasoning).
bool keeps_cpu(const Value* device) {
  if (device->node()->kind() == c10::prim::device) return true;
  const std::optional<c10::IValue> constant = torch::jit::toIValue(device);
  return constant &&
         (constant->isNone() || (constant->isDevice() && constant->toDevice().is_cpu()));
}

// Ops that move a tensor to another device without a Device argument.
bool moves_device(const Node* node) {
  const std::string_view name = node->kind().toQualString();
  for (std::string_view target : {"aten::cuda", "aten::xpu", "aten::mps", "aten::hpu", "aten::ipu",
                                  "aten::mtia", "aten::vulkan", "aten::metal"}) {
    if (name == target) return true;
  }
  return node->kind() == c10::prim::PythonOp;
}

bool stays_on_cpu(const torch::jit::Block* block) {
  for (const Node* node : block->nodes()) {
    if (moves_device(node)) return false;
    if (node->kind() == c10::prim::Constant) {
      const std::optional<c10::IValue> constant = torch::jit::toIValue(node->output());
      if (constant && constant->isTensor() && !constant->toTensor().device().is_cpu()) {
        return false;
      }
      continue;
    }
    for (const Value* input : node->inputs()) {
      if (is_device_type(input->type()) && !keeps_cpu(input)) return false;
    }
    for (const torch::jit::Block* inner : node->blocks())
      if (!stays_on_cpu(inner)) return false;
  }
  return true;
}

void collect_device_reads(torch::jit::Block* block, std::vector<Node*>& reads) {
  for (Node* node : block->nodes()) {
    if (node->kind() == c10::prim::device && node->inputs().size() == 1 &&
        node->input()->type()->cast<c10::TensorType>()) {
      reads.push_back(node);
    }
    for (torch::jit::Block* inner : node->blocks())
      collect_device_reads(inner, reads);
  }
}

}  // namespace

bool fold_cpu_devices(torch::jit::Graph& graph, const std::vector<c10::IValue>& inputs) {
  for (const c10::IValue& input : inputs) {
    // A tensor list, a tuple or an object could hold a tensor elsewhere.
    if (input.isTensor()) {
      if (input.toTensor().defined() && !input.toTensor().device().is_cpu()) return false;
    } else if (!input.isNone() && !input.isScalar() && !input.isBool() && !input.isString() &&
               !input.isIntList() && !input.isDoubleList() && !input.isBoolList()) {
      return false;
    }
  }
  if (!stays_on_cpu(graph.block())) return false;
  std::vector<Node*> reads;
  collect_device_reads(graph.block(), reads);
  bool folded = false;
  for (Node* read : reads)
    folded |= replace_with_constant(read->output(), c10::Device(c10::kCPU));
  return folded;
}

}  // namespace kiln
