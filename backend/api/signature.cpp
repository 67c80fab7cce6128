#include "backend/api/signature.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>

#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

void append_tensor(const at::Tensor& t, SignatureKey& key) {
  if (!t.defined()) {
    key.push_back(-1);
    return;
  }
  key.push_back(static_cast<int64_t>(t.scalar_type()));
  key.push_back(static_cast<int64_t>(t.layout()));
  key.push_back(static_cast<int64_t>(t.device().type()));
  key.push_back(t.device().index());
  key.push_back(t.requires_grad());
  key.push_back(t.dim());
  if (t.layout() != at::kStrided) return;
  for (int64_t s : t.sizes())
    key.push_back(s);
  for (int64_t s : t.strides())
    key.push_back(s);
}

// Global state that a specialization folds (specialize_graph.h).
SignatureKey global_state() {
  return {at::GradMode::is_enabled(), at::autocast::is_autocast_enabled(at::kCPU),
          at::autocast::is_autocast_enabled(at::kCUDA)};
}

}  // namespace

size_t SignatureHash::operator()(const SignatureKey& key) const {
  size_t h = key.size();
  for (int64_t v : key)
    h ^= std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

int64_t kind_of(const c10::IValue& input) {
  return input.isTensor()   ? -1
         : input.isNone()   ? 0
         : input.isInt()    ? 1
         : input.isDouble() ? 2
         : input.isBool()   ? 3
         : input.isString() ? 4
         : input.isList()   ? 5
         : input.isTuple()  ? 6
                            : 7;
}

SignatureKey signature_of(const std::vector<c10::IValue>& inputs) {
  SignatureKey key = global_state();
  for (const auto& input : inputs) {
    if (input.isTensor()) {
      append_tensor(input.toTensor(), key);
    } else {
      // Non-tensor inputs are run by the interpreter, so only their kind matters.
      key.push_back(-2);
      key.push_back(kind_of(input));
    }
  }
  return key;
}

SignatureKey signature_of(const std::vector<at::Tensor>& inputs) {
  SignatureKey key = global_state();
  for (const auto& t : inputs)
    append_tensor(t, key);
  return key;
}

std::string describe_inputs(const std::vector<c10::IValue>& inputs) {
  std::string out;
  for (const auto& input : inputs) {
    if (!out.empty()) out += ", ";
    if (input.isTensor()) {
      auto type = tensor_type_of(input.toTensor());
      out += type ? ir::type_string(*type)
                  : "Tensor(" + std::string(c10::toString(input.toTensor().scalar_type())) + ")";
    } else {
      out += input.tagKind();
    }
  }
  return "(" + out + ")";
}

}  // namespace kiln
