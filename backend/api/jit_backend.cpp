// kiln as a TorchScript backend ("to_backend" API):
//
//   lowered = torch._C._jit_to_backend("kiln", scripted, {"forward": {"strict": True}})
//
// Preprocessing validates the options and keeps the module, saved as a TorchScript archive behind
// kiln's payload header (backend_payload.h) in a uint8 tensor, as the payload (a module object as
// payload loses its submodules' methods when the lowered module is saved). Loading a saved lowered
// module (in a process where libkiln is loaded, e.g. after `import kiln`) compiles it again through
// kiln::compile.
#include <torch/csrc/jit/backends/backend.h>
#include <torch/csrc/jit/backends/backend_preprocess.h>

#include <torch/script.h>

#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "backend/api/backend_payload.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

// One method's compile spec ({"strict": true, "mode": "default"}) as CompileOptions.
CompileOptions options_from_spec(const std::string& method, const c10::IValue& spec) {
  if (method != "forward") {
    throw Error(
        ErrorKind::InvalidInput,
        "the kiln TorchScript backend compiles 'forward' only; got method '" + method + "'");
  }
  if (!spec.isGenericDict()) {
    throw Error(
        ErrorKind::InvalidInput,
        "the compile spec of 'forward' must be a dict of kiln options, got " + spec.tagKind());
  }
  std::map<std::string, std::string> values;
  for (const auto& entry : spec.toGenericDict()) {
    if (!entry.key().isString()) {
      throw Error(ErrorKind::InvalidInput,
                  "kiln option names are strings, got " + entry.key().tagKind());
    }
    const std::string& key = entry.key().toStringRef();
    const c10::IValue& value = entry.value();
    if (value.isBool()) {
      values[key] = value.toBool() ? "true" : "false";
    } else if (value.isInt()) {
      values[key] = std::to_string(value.toInt());
    } else if (value.isString()) {
      values[key] = value.toStringRef();
    } else {
      throw Error(ErrorKind::InvalidInput, "option '" + key + "' has a value of type " +
                                               value.tagKind() +
                                               "; options take a bool, an int or a string");
    }
  }
  return CompileOptions::from_map(values);
}

// The module is loaded and compiled at the first call, not in compile(): compile() also runs
// while torch.jit.load is still reading the lowered module, and loading an archive from inside
// another load resolves its class types in the outer load's compilation unit.
class KilnJitBackend : public torch::jit::PyTorchBackendInterface {
 public:
  bool is_available() override { return true; }

  c10::impl::GenericDict compile(c10::IValue processed,
                                 c10::impl::GenericDict method_compile_spec) override {
    if (!processed.isTensor() || processed.toTensor().scalar_type() != at::kByte) {
      throw Error(ErrorKind::InvalidInput,
                  "the module's kiln backend payload is a " + processed.tagKind() +
                      ", not kiln's byte tensor; lower the original module to kiln again");
    }
    const at::Tensor payload = processed.toTensor().contiguous();
    const std::string_view archive = decode_payload(
        {static_cast<const char*>(payload.const_data_ptr()), static_cast<size_t>(payload.numel())});
    std::lock_guard lock(mutex_);
    archive_.assign(archive);
    c10::impl::GenericDict handles(c10::StringType::get(), c10::AnyType::get());
    for (const auto& entry : method_compile_spec) {
      const std::string method = entry.key().toStringRef();
      options_.insert_or_assign(method, options_from_spec(method, entry.value()));
      handles.insert(method, method);
    }
    return handles;
  }

  c10::impl::GenericList execute(c10::IValue handle, c10::impl::GenericList inputs) override {
    c10::IValue result = compiled(handle.toStringRef())
                             .forward(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
    c10::impl::GenericList outputs(c10::AnyType::get());
    if (result.isTuple()) {
      for (const auto& element : result.toTupleRef().elements())
        outputs.push_back(element);
    } else {
      outputs.push_back(std::move(result));
    }
    return outputs;
  }

 private:
  const CompiledModule& compiled(const std::string& method) {
    std::lock_guard lock(mutex_);
    auto found = compiled_.find(method);
    if (found == compiled_.end()) {
      std::istringstream bytes(archive_);
      torch::jit::Module module;
      try {
        module = torch::jit::load(bytes);
      } catch (const c10::Error& e) {
        throw Error(ErrorKind::InvalidInput,
                    std::string("the TorchScript archive in the module's kiln backend payload "
                                "cannot be loaded: ") +
                        e.what_without_backtrace());
      }
      found = compiled_.emplace(method, kiln::compile(module, options_.at(method))).first;
    }
    return found->second;
  }

  std::mutex mutex_;
  std::string archive_;
  std::unordered_map<std::string, CompileOptions> options_;
  std::unordered_map<std::string, CompiledModule> compiled_;
};

c10::IValue preprocess(const torch::jit::Module& module,
                       const c10::Dict<c10::IValue, c10::IValue>& method_compile_spec,
                       const torch::jit::BackendDebugHandleGenerator&) {
  for (const auto& entry : method_compile_spec)
    options_from_spec(entry.key().toStringRef(), entry.value());  // fail now, not at load
  std::ostringstream bytes;
  module.save(bytes);
  const std::string encoded = encode_payload(bytes.str());
  at::Tensor payload = at::empty({static_cast<int64_t>(encoded.size())}, at::kByte);
  std::memcpy(payload.mutable_data_ptr(), encoded.data(), encoded.size());
  return payload;
}

const auto backend_registration = torch::jit::backend<KilnJitBackend>("kiln");
const auto preprocess_registration = torch::jit::backend_preprocess_register("kiln", preprocess);

}  // namespace
}  // namespace kiln
