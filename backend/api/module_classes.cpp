#include "backend/api/module_classes.h"

#include "backend/api/signature.h"

namespace kiln {
namespace {

std::vector<at::Tensor> tensors_of(const std::vector<c10::IValue>& inputs) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(inputs.size());
  for (const c10::IValue& input : inputs)
    tensors.push_back(input.isTensor() ? input.toTensor() : at::Tensor());
  return tensors;
}

std::vector<int64_t> kinds_of(const std::vector<c10::IValue>& inputs) {
  std::vector<int64_t> kinds;
  kinds.reserve(inputs.size());
  for (const c10::IValue& input : inputs)
    kinds.push_back(kind_of(input));
  return kinds;
}

}  // namespace

const ModuleClasses::Class* ModuleClasses::find(const std::vector<c10::IValue>& inputs) const {
  if (classes_.empty()) return nullptr;
  const std::vector<at::Tensor> tensors = tensors_of(inputs);
  const std::vector<int64_t> kinds = kinds_of(inputs);
  for (const Class& each : classes_) {
    if (each.kinds == kinds && binding_of(each.shape_class, tensors)) return &each;
  }
  return nullptr;
}

std::shared_ptr<const Specialization> ModuleClasses::member(const std::vector<c10::IValue>& inputs,
                                                            bool reserves) const {
  std::lock_guard lock(mutex_);
  const Class* found = find(inputs);
  if (!found || (found->in_reserve && !reserves && found->own_compiles < kOwnCompiles))
    return nullptr;
  return found->specialization;
}

bool ModuleClasses::compiles_on_its_own(const std::vector<c10::IValue>& inputs) {
  std::lock_guard lock(mutex_);
  Class* found = const_cast<Class*>(find(inputs));
  if (!found || !found->in_reserve || found->own_compiles >= kOwnCompiles) return false;
  ++found->own_compiles;
  return true;
}

std::optional<ModuleClasses::Formed> ModuleClasses::form(const std::vector<c10::IValue>& inputs,
                                                         std::string* why_not) const {
  std::lock_guard lock(mutex_);
  const std::vector<at::Tensor> tensors = tensors_of(inputs);
  const std::vector<int64_t> kinds = kinds_of(inputs);
  for (auto it = compiled_.rbegin(); it != compiled_.rend(); ++it) {
    if (it->kinds != kinds) continue;
    std::string why;
    std::optional<ShapeClass> formed = form_class(it->tensors, tensors, {}, &why);
    if (formed) return Formed{std::move(*formed), it->interpreter_nodes};
    if (why_not && it == compiled_.rbegin()) *why_not = why;
  }
  return std::nullopt;
}

void ModuleClasses::record(const std::vector<c10::IValue>& inputs, int interpreter_nodes) {
  std::lock_guard lock(mutex_);
  compiled_.push_back({describe(tensors_of(inputs), {}), kinds_of(inputs), interpreter_nodes});
}

void ModuleClasses::add(ShapeClass shape_class, const std::vector<c10::IValue>& inputs,
                        std::shared_ptr<const Specialization> specialization, bool in_reserve) {
  std::lock_guard lock(mutex_);
  // In reserve, the signature it was formed with and this one compile on their own.
  classes_.push_back({std::move(shape_class), kinds_of(inputs), std::move(specialization),
                      in_reserve, in_reserve ? 2 : 0});
}

std::vector<std::vector<int>> varying_dims(const ShapeClass& shape_class) {
  std::vector<std::vector<int>> dims(shape_class.inputs.size());
  for (const auto& size_input : shape_class.size_inputs)
    for (const auto& [input, dim] : size_input)
      dims[input].push_back(dim);
  return dims;
}

}  // namespace kiln
