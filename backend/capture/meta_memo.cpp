#include "backend/capture/meta_memo.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

// Past this many distinct runs the memory starts over (a long-lived process that imports many
// different models must not grow without bound; a model's own repeats are close together).
constexpr size_t kMaxRemembered = 8192;

template <class T>
void append(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// Appends what the op's outputs may depend on in `value`; false where it is something this
// memory does not describe (then the op just runs).
bool append_value(std::string& key, const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) {
      key += 'u';
      return true;
    }
    if (!t.is_meta() || t.layout() != at::kStrided ||
        t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
      return false;
    }
    key += 'T';
    append(key, static_cast<int8_t>(t.scalar_type()));
    append(key, static_cast<int8_t>(t.requires_grad()));
    append(key, static_cast<int32_t>(t.dim()));
    for (int64_t size : t.sizes())
      append(key, size);
    for (int64_t stride : t.strides())
      append(key, stride);
    return true;
  }
  if (value.isNone()) {
    key += 'N';
  } else if (value.isBool()) {
    key += value.toBool() ? 't' : 'f';
  } else if (value.isInt()) {
    key += 'i';
    append(key, value.toInt());
  } else if (value.isDouble()) {
    key += 'd';
    append(key, value.toDouble());  // its bits: 0.1 and 0.1000001 differ
  } else if (value.isString() || value.isDevice()) {
    const std::string text = value.isString() ? value.toStringRef() : value.toDevice().str();
    key += 's';
    append(key, static_cast<uint32_t>(text.size()));
    key += text;
  } else if (value.isList()) {
    key += 'l';
    append(key, static_cast<uint32_t>(value.toListRef().size()));
    for (const c10::IValue& element : value.toListRef()) {
      if (!append_value(key, element)) return false;
    }
  } else if (value.isTuple()) {
    key += 'p';
    append(key, static_cast<uint32_t>(value.toTupleRef().elements().size()));
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      if (!append_value(key, element)) return false;
    }
  } else {
    return false;
  }
  return true;
}

bool remembers(const c10::FunctionSchema& schema) {
  if (schema.is_mutable()) return false;
  for (const c10::Argument& out : schema.returns()) {
    if (out.alias_info()) return false;  // a view: its input's storage matters
  }
  return true;
}

class MetaMemo {
 public:
  // The outputs remembered for `key`, as fresh meta tensors; false if there are none.
  bool recall(const std::string& key, torch::jit::Stack& stack) {
    std::lock_guard lock(mutex_);
    auto found = outputs_.find(key);
    if (found == outputs_.end()) return false;
    stack.clear();
    for (const c10::IValue& out : found->second)
      stack.push_back(out.isNone() ? out : c10::IValue(meta_like(out.toTensor())));
    ++recalled_;
    return true;
  }

  void remember(std::string key, const torch::jit::Stack& outputs) {
    std::vector<c10::IValue> kept;
    for (const c10::IValue& out : outputs) {
      if (out.isNone()) {
        kept.push_back(out);
        continue;
      }
      if (!out.isTensor() || !out.toTensor().defined() || !out.toTensor().is_meta()) return;
      kept.push_back(meta_like(out.toTensor()));
    }
    std::lock_guard lock(mutex_);
    if (outputs_.size() >= kMaxRemembered) outputs_.clear();
    outputs_.emplace(std::move(key), std::move(kept));
  }

  int64_t recalled() const { return recalled_; }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<c10::IValue>> outputs_;
  std::atomic<int64_t> recalled_ = 0;
};

MetaMemo& memo() {
  static MetaMemo* instance = new MetaMemo();  // never destroyed: imports may run at exit
  return *instance;
}

}  // namespace

void run_on_meta_remembered(const c10::FunctionSchema& schema,
                            const std::function<void(torch::jit::Stack&)>& run,
                            torch::jit::Stack& stack) {
  std::string key = schema.name() + "." + schema.overload_name();
  key += '\0';
  append(key, static_cast<int8_t>(c10::GradMode::is_enabled()));
  bool describable = remembers(schema);
  for (size_t i = 0; describable && i < stack.size(); ++i)
    describable = append_value(key, stack[i]);
  if (!describable) {
    run(stack);
    return;
  }
  if (memo().recall(key, stack)) return;
  run(stack);
  memo().remember(std::move(key), stack);
}

int64_t meta_runs_remembered() {
  return memo().recalled();
}

}  // namespace kiln
