#include <atomic>
#include <chrono>

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend/api/compiled_module_impl.h"
#include "backend/api/environment.h"
#include "backend/api/package.h"
#include "backend/api/stats_recorder.h"

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/code_bundle.h"
#endif

namespace kiln {
namespace {

std::string signature_text(const std::vector<c10::Argument>& args) {
  std::string out;
  for (const auto& arg : args)
    out += (out.empty() ? "" : ", ") + arg.name() + ": " + arg.type()->str();
  return "forward(" + out + ")";
}

}  // namespace

const torch::jit::Module& CompiledModule::Impl::original_module() const {
  if (load_original) {
    std::call_once(original_loaded, [this] { original = load_original(); });
  }
  return original;
}

void CompiledModule::Impl::check_inputs(std::vector<c10::IValue>& inputs) const {
  const auto& args = captured.arguments;
  if (inputs.size() > args.size() ||
      (inputs.size() < args.size() && !args[inputs.size()].default_value())) {
    throw Error(ErrorKind::InvalidInput, "wrong number of inputs: " + signature_text(args) +
                                             " takes " + std::to_string(args.size()) + ", got " +
                                             std::to_string(inputs.size()));
  }
  for (size_t i = inputs.size(); i < args.size(); ++i) {
    if (!args[i].default_value()) {
      throw Error(ErrorKind::InvalidInput,
                  "missing input '" + args[i].name() + "' of " + signature_text(args));
    }
    inputs.push_back(*args[i].default_value());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A tensor passed for a Tensor argument needs no type: building one (sizes, strides, a
    // shared object) for each input would cost more than a small model's whole call.
    const bool tensor_for_tensor =
        inputs[i].isTensor() && args[i].type()->kind() == c10::TypeKind::TensorType;
    if (!tensor_for_tensor && !inputs[i].type()->isSubtypeOf(*args[i].type())) {
      throw Error(ErrorKind::InvalidInput, "input " + std::to_string(i) + " ('" + args[i].name() +
                                               "') must be " + args[i].type()->str() + ", got " +
                                               inputs[i].type()->str());
    }
    if (options.target == Target::CPU && inputs[i].isTensor() &&
        !inputs[i].toTensor().device().is_cpu()) {
      throw Error(ErrorKind::InvalidInput,
                  "input " + std::to_string(i) + " ('" + args[i].name() + "') is on device " +
                      inputs[i].toTensor().device().str() +
                      ", but the module was compiled with target=cpu; allowed: cpu tensors "
                      "(or compile with target=auto)");
    }
  }
}

std::shared_ptr<const Specialization> CompiledModule::Impl::specialization_for(
    const std::vector<c10::IValue>& inputs) const {
  return specializations.get(
      signature_of(inputs), kMaxSignatures, [&](int) { return find_or_compile(inputs); },
      // Past kMaxSignatures nothing more is cached or compiled; past_limit finds a member's class.
      [&] { return past_limit(inputs); });
}

std::shared_ptr<const Specialization> CompiledModule::Impl::find_or_compile(
    const std::vector<c10::IValue>& inputs) const {
  if (auto spec = classes.member(inputs)) return spec;
  const int index = compiles++;
  if (index >= options.max_specializations) {
    compiles--;
    return past_limit(inputs);
  }
  // A member of a class in reserve compiles on its own (that class's graph leaves more to the
  // interpreter) up to ModuleClasses::kOwnCompiles.
  if (!disabled_names().contains("shape_classes") && !classes.compiles_on_its_own(inputs)) {
    std::string why_not;
    if (std::optional<ModuleClasses::Formed> formed = classes.form(inputs, &why_not)) {
      if (auto spec = compile_class(index, std::move(*formed), inputs)) return spec;
    } else if (!why_not.empty()) {
      log(LogLevel::Debug, "no module shape class for " + describe_inputs(inputs) + ": " + why_not);
    }
  }
  auto spec = compile_specialization(index, inputs);
  classes.record(inputs, spec->interpreter_nodes());
  return spec;
}

std::shared_ptr<const Specialization> CompiledModule::Impl::compile_class(
    int index, ModuleClasses::Formed formed, const std::vector<c10::IValue>& inputs) const {
  try {
    auto spec =
        std::make_shared<const Specialization>(captured, options, "class" + std::to_string(index),
                                               inputs, varying_dims(formed.shape_class));
    const bool in_reserve = spec->interpreter_nodes() > formed.interpreter_nodes;
    classes.add(std::move(formed.shape_class), inputs, spec, in_reserve);
    if (in_reserve) {
      log(LogLevel::Debug,
          "a module shape class for " + describe_inputs(inputs) + " has " +
              std::to_string(spec->regions()) + " regions and leaves " +
              std::to_string(spec->interpreter_nodes()) + " nodes to the interpreter, against " +
              std::to_string(formed.interpreter_nodes) + " where sizes fold: in reserve, after " +
              std::to_string(ModuleClasses::kOwnCompiles) + " signatures compiled on their own");
      return nullptr;
    }
    log(LogLevel::Info, "specialization " + std::to_string(index) +
                            " is a shape class, size-generic in the dims that moved, for " +
                            describe_inputs(inputs));
    if (std::optional<c10::IValue> described = describe_for_package(inputs)) {
      std::lock_guard lock(signatures_mutex);
      signatures.push_back(std::move(*described));
    }
    return spec;
  } catch (const std::exception& e) {
    // The signature compiles on its own instead, which folds what this one could not.
    log(LogLevel::Debug, std::string("the module shape class failed: ") + e.what());
    return nullptr;
  }
}

std::shared_ptr<const Specialization> CompiledModule::Impl::past_limit(
    const std::vector<c10::IValue>& inputs) const {
  if (auto spec = classes.member(inputs, /*reserves=*/true)) return spec;
  if (!warned_limit.exchange(true)) {
    record_fallback();
    log(LogLevel::Warn,
        "more than max_specializations=" + std::to_string(options.max_specializations) +
            " input signatures (this one: " + describe_inputs(inputs) +
            "); new ones run the frozen module in the TorchScript interpreter");
  }
  return Specialization::uncompiled("past max_specializations: the frozen module runs uncompiled");
}

std::shared_ptr<const Specialization> CompiledModule::Impl::compile_specialization(
    int index, const std::vector<c10::IValue>& inputs) const {
  log(LogLevel::Info,
      "compiling specialization " + std::to_string(index) + " for " + describe_inputs(inputs));
  if (std::optional<c10::IValue> described = describe_for_package(inputs)) {
    std::lock_guard lock(signatures_mutex);
    signatures.push_back(std::move(*described));
  }
  std::string why;
  try {
    return std::make_shared<const Specialization>(captured, options, "spec" + std::to_string(index),
                                                  inputs);
  } catch (const Error& e) {
    if (options.strict) throw;
    why = e.what();
    log(LogLevel::Warn, "the module runs uncompiled for " + describe_inputs(inputs) + ": " + why);
  } catch (const std::exception& e) {
    // Specializing and partitioning the graph threw something that is not kiln's error: a bug.
    why = std::string("kiln failed (internal): ") + e.what();
    if (options.strict) throw Error(ErrorKind::Internal, "specializing the module: " + why);
    log(LogLevel::Error, "specializing the module for " + describe_inputs(inputs) + ": " + why +
                             "; it runs uncompiled (results are unaffected; please report this "
                             "as a kiln bug)");
  }
  record_fallback();
  return Specialization::uncompiled("the module was not compiled: " + why);
}

c10::IValue CompiledModule::Impl::run(std::vector<c10::IValue> inputs) const {
#ifdef KILN_HAVE_LLVM
  jit::UseCodeBundle use_package(package_code.get());
#endif
  check_inputs(inputs);
  auto spec = specialization_for(inputs);
  clear_region_error();
  try {
    return spec->run(captured, std::move(inputs));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // What a region raised comes back rewrapped by the interpreter: kiln's own errors (strict
    // mode's) keep their kind. Anything else was raised by the model's ops on these inputs, as
    // eager would raise it (a region that fails where its fallback does not runs the fallback).
    if (auto kiln_error = take_region_error(e)) throw *kiln_error;
    const auto* aten_error = dynamic_cast<const c10::Error*>(&e);
    throw Error(ErrorKind::InvalidInput,
                std::string("the model failed on these inputs: ") +
                    (aten_error ? aten_error->what_without_backtrace() : e.what()));
  }
}

void CompiledModule::Impl::prepare(std::vector<c10::IValue> inputs) const {
#ifdef KILN_HAVE_LLVM
  jit::UseCodeBundle use_package(package_code.get());
#endif
  check_inputs(inputs);
  if (!specialization_for(inputs)->prepare(inputs)) run(std::move(inputs));
}

CompiledModule::CompiledModule(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

c10::IValue CompiledModule::forward(std::vector<c10::IValue> inputs) const {
  return impl_->run(std::move(inputs));
}

const torch::jit::Module& CompiledModule::original() const {
  return impl_->original_module();
}
const c10::FunctionSchema& CompiledModule::forward_schema() const {
  return impl_->captured.frozen.get_method("forward").function().getSchema();
}
const CompileOptions& CompiledModule::options() const {
  return impl_->options;
}

int CompiledModule::num_specializations() const {
  return impl_->compiles.load();
}

Explanation CompiledModule::explain(std::vector<c10::IValue> inputs) const {
  impl_->run(inputs);  // compiles, and records which specialization of each region ran
  impl_->check_inputs(inputs);
  Explanation explanation;
  impl_->specialization_for(inputs)->explain_into(explanation);
  explanation.tally();
  return explanation;
}

Profile CompiledModule::profile(std::vector<c10::IValue> inputs, int calls) const {
  if (calls < 1 || calls > 1000000) {
    throw Error(ErrorKind::InvalidInput,
                "profile: calls must be 1 to 1000000, got " + std::to_string(calls));
  }
  impl_->run(inputs);
  start_profiling();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  try {
    for (int i = 0; i < calls; ++i)
      impl_->run(inputs);
  } catch (...) {
    finish_profiling(1, 0);  // closes the session, so the next one can open
    throw;
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return finish_profiling(calls, total_ms / calls);
}

namespace {

void check_target(const CompileOptions& options) {
  if (options.target == Target::CUDA && !at::hasCUDA()) {
    // libtorch_cuda registers CUDA's device guard when it is loaded.
    const std::string why = c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)
                                ? "LibTorch's CUDA part is loaded but found no GPU"
                                : "no CUDA-enabled LibTorch is loaded: libtorch_cuda is not in "
                                  "this process";
    throw Error(ErrorKind::InvalidInput,
                "target=cuda, but CUDA is not available in this process (" + why +
                    "); allowed here: target=auto or target=cpu");
  }
}

CompiledModule compiled_from(std::shared_ptr<CompiledModule::Impl> impl) {
  const std::vector<c10::IValue> example_inputs = impl->options.example_inputs;
  CompiledModule compiled(std::move(impl));
  if (!example_inputs.empty()) compiled.forward(example_inputs);
  return compiled;
}

}  // namespace

CompiledModule compile(const torch::jit::Module& module, const CompileOptions& options) {
  check_target(options);
  auto impl = std::make_shared<CompiledModule::Impl>();
  impl->original = module;
  impl->options = options;
  impl->captured = capture_module(module);
  return compiled_from(std::move(impl));
}

CompiledModule compile_owned(const torch::jit::Module& module, const CompileOptions& options,
                             std::function<torch::jit::Module()> load_original) {
  check_target(options);
  auto impl = std::make_shared<CompiledModule::Impl>();
  impl->load_original = std::move(load_original);
  impl->options = options;
  impl->captured = capture_module(module, /*share_weights=*/true);
  return compiled_from(std::move(impl));
}

std::pair<torch::jit::Module, CompileOptions> unwrap(const CompiledModule& compiled) {
  return {compiled.original(), compiled.options()};
}

}  // namespace kiln
