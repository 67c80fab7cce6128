// kiln as a TorchScript backend ("to_backend" API):
//
//   lowered = torch._C._jit_to_backend("kiln", scripted, {"forward": {"strict": True}})
//
// Preprocessing validates the options and keeps the module itself as the payload, so a saved
// lowered module holds the module and its options; loading it (in a process where libkiln is
// loaded, e.g. after `import kiln`) compiles it again through kiln::compile.
#include <torch/csrc/jit/backends/backend.h>
#include <torch/csrc/jit/backends/backend_preprocess.h>

#include <map>
#include <unordered_map>

#include "kiln/kiln.h"

namespace kiln {
namespace {

// One method's compile spec ({"strict": true, "mode": "default"}) as CompileOptions.
CompileOptions options_from_spec(const std::string& method, const c10::IValue& spec) {
  if (method != "forward") {
    throw Error(ErrorKind::InvalidInput,
                "the kiln TorchScript backend compiles 'forward' only; got method '" + method + "'");
  }
  if (!spec.isGenericDict()) {
    throw Error(ErrorKind::InvalidInput,
                "the compile spec of 'forward' must be a dict of kiln options, got " +
                    spec.tagKind());
  }
  std::map<std::string, std::string> values;
  for (const auto& entry : spec.toGenericDict()) {
    if (!entry.key().isString()) {
      throw Error(ErrorKind::InvalidInput, "kiln option names are strings, got " +
                                               entry.key().tagKind());
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

class KilnJitBackend : public torch::jit::PyTorchBackendInterface {
 public:
  bool is_available() override { return true; }

  c10::impl::GenericDict compile(c10::IValue processed,
                                 c10::impl::GenericDict method_compile_spec) override {
    torch::jit::Module module(processed.toObject());
    c10::impl::GenericDict handles(c10::StringType::get(), c10::AnyType::get());
    for (const auto& entry : method_compile_spec) {
      const std::string method = entry.key().toStringRef();
      compiled_.insert_or_assign(
          method, kiln::compile(module, options_from_spec(method, entry.value())));
      handles.insert(method, method);
    }
    return handles;
  }

  c10::impl::GenericList execute(c10::IValue handle, c10::impl::GenericList inputs) override {
    const CompiledModule& compiled = compiled_.at(handle.toStringRef());
    c10::IValue result = compiled.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
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
  std::unordered_map<std::string, CompiledModule> compiled_;
};

c10::IValue preprocess(const torch::jit::Module& module,
                       const c10::Dict<c10::IValue, c10::IValue>& method_compile_spec,
                       const torch::jit::BackendDebugHandleGenerator&) {
  for (const auto& entry : method_compile_spec)
    options_from_spec(entry.key().toStringRef(), entry.value());  // fail now, not at load
  return module._ivalue();
}

const auto backend_registration = torch::jit::backend<KilnJitBackend>("kiln");
const auto preprocess_registration = torch::jit::backend_preprocess_register("kiln", preprocess);

}  // namespace
}  // namespace kiln
