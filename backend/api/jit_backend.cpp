// kiln as a TorchScript backend ("to_backend" API):
//
//   lowered = torch._C._jit_to_backend("kiln", scripted, {"forward": {"strict": True}})
//
//   lowered = torch._C._jit_to_backend("kiln", scripted,
//                                      {"forward": {"example_inputs": (x,)}})  # code included
//
// Preprocessing validates the options, compiles the module (for the spec's example_inputs, if
// any) and keeps it as a package (package.h: the module's TorchScript archive, the options, the
// compiled signatures and their machine code) behind kiln's payload header (backend_payload.h) in
// a uint8 tensor, as the payload (a module object as payload loses its submodules' methods when
// the lowered module is saved). Loading a saved lowered module (in a process where libkiln is
// loaded, e.g. after `import kiln`) loads the package at the first call, as kiln::load does: on
// the same CPU and kiln build the example signatures compile without generating code.
#include <torch/csrc/jit/backends/backend.h>
#include <torch/csrc/jit/backends/backend_preprocess.h>

#include <torch/script.h>

#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "backend/api/backend_payload.h"
#include "backend/api/package.h"
#include "kiln/kiln.h"
#include "passes/base/strings.h"

namespace kiln {
namespace {

// The compile spec's inputs to compile the lowered module for ahead of time.
constexpr const char* kExampleInputs = "example_inputs";

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
    if (key == kExampleInputs) continue;  // example_inputs_in_spec reads it
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
    const std::string_view package = decode_payload(
        {static_cast<const char*>(payload.const_data_ptr()), static_cast<size_t>(payload.numel())});
    std::lock_guard lock(mutex_);
    package_ = std::make_shared<const std::string>(package);
    c10::impl::GenericDict handles(c10::StringType::get(), c10::AnyType::get());
    for (const auto& entry : method_compile_spec) {
      const std::string method = entry.key().toStringRef();
      options_from_spec(method, entry.value());  // the package holds the options themselves
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
      // Compiled with the options the package holds: preprocess wrote them from this spec. Its
      // entries are views of the payload, which they keep alive.
      found = compiled_
                  .emplace(method, load_package_bytes(shared_view(package_, *package_),
                                                      "(kiln backend payload)"))
                  .first;
    }
    return found->second;
  }

  std::mutex mutex_;
  std::shared_ptr<const std::string> package_;
  std::unordered_map<std::string, CompiledModule> compiled_;
};

// The spec's `example_inputs` (a tuple or list of forward's arguments), if it has them.
std::optional<std::vector<c10::IValue>> example_inputs_in_spec(const c10::IValue& spec) {
  const c10::impl::GenericDict dict = spec.toGenericDict();
  if (!dict.contains(kExampleInputs)) return std::nullopt;
  const c10::IValue value = dict.at(kExampleInputs);
  if (value.isTuple()) return value.toTupleRef().elements().vec();
  if (value.isList()) return value.toList().vec();
  throw Error(ErrorKind::InvalidInput, std::string(kExampleInputs) +
                                           " must be a tuple or list of forward's inputs, got " +
                                           value.tagKind());
}

// The payload is a package (package.h): the module, its options and, when the spec gives
// example inputs, their compiled code, so that a load on this machine generates none.
c10::IValue preprocess(const torch::jit::Module& module,
                       const c10::Dict<c10::IValue, c10::IValue>& method_compile_spec,
                       const torch::jit::BackendDebugHandleGenerator&) {
  std::optional<CompileOptions> options;
  std::optional<std::vector<c10::IValue>> examples;
  for (const auto& entry : method_compile_spec) {
    options = options_from_spec(entry.key().toStringRef(), entry.value());  // fail now
    examples = example_inputs_in_spec(entry.value());
  }
  CompiledModule compiled = kiln::compile(module, options.value_or(CompileOptions{}));
  if (examples) compiled.forward(*examples);
  const std::string encoded = encode_payload(package_bytes(compiled));
  at::Tensor payload = at::empty({static_cast<int64_t>(encoded.size())}, at::kByte);
  std::memcpy(payload.mutable_data_ptr(), encoded.data(), encoded.size());
  return payload;
}

const auto backend_registration = torch::jit::backend<KilnJitBackend>("kiln");
const auto preprocess_registration = torch::jit::backend_preprocess_register("kiln", preprocess);

}  // namespace
}  // namespace kiln
