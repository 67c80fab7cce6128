#include "backend/api/region.h"

#include <algorithm>
#include <chrono>

#include <torch/csrc/jit/runtime/interpreter.h>
#include "backend/api/environment.h"
#include "backend/api/graph_cache.h"
#include "backend/api/precision.h"
#include "backend/api/stats_recorder.h"
#include "backend/capture/import_graph.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

bool needs_autograd(const Tensors& inputs) {
  if (!at::GradMode::is_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const at::Tensor& t) { return t.defined() && t.requires_grad(); });
}

bool is_unchanged(const at::Tensor& now, const at::Tensor& then, int64_t version,
                  const void* data) {
  return now.unsafeGetTensorImpl() == then.unsafeGetTensorImpl() && now._version() == version &&
         now.data_ptr() == data;
}

// A region's graph has no type for an undefined tensor (None passed where the graph reads a
// Tensor): such a call runs the way it would without kiln, which decides whether it is an error.
void reject_undefined(const Tensors& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) continue;
    throw Error(ErrorKind::Unsupported, "its input " + std::to_string(i) +
                                            " is None (an undefined tensor); kiln compiles a "
                                            "region for defined tensors only");
  }
}

// The fallback in a sentence: "the TorchScript interpreter", "eager PyTorch".
std::string fallback_phrase(RunsIn fallback) {
  return fallback == RunsIn::Eager ? "eager PyTorch" : "the TorchScript interpreter";
}

}  // namespace

RegionSource torchscript_region(std::shared_ptr<torch::jit::Graph> region) {
  RegionSource source;
  source.import = [region](const Tensors& inputs, const std::vector<size_t>&) {
    return import_region(*region, inputs);  // TorchScript freezes weights at capture
  };
  auto code = std::make_shared<torch::jit::Code>(region, "region");
  source.fallback = [code](const Tensors& inputs) {
    torch::jit::Stack stack(inputs.begin(), inputs.end());
    torch::jit::InterpreterState(*code).run(stack);
    Tensors outputs;
    for (auto& value : stack)
      outputs.push_back(value.toTensor());
    return outputs;
  };
  source.fallback_in = RunsIn::Interpreter;
  for (const torch::jit::Node* node : region->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct ||
        kind == c10::prim::ListUnpack) {
      continue;
    }
    source.op_names.push_back(node->kind().toQualString());
  }
  return source;
}

RegionSource fx_region(std::shared_ptr<const FxProgram> program,
                       std::function<Tensors(const Tensors&)> fallback, std::vector<size_t> weights,
                       DeclaredSizes declared_sizes) {
  for (size_t i : weights) {
    if (static_cast<int64_t>(i) >= program->num_inputs()) {
      throw Error(ErrorKind::InvalidInput, "weight input " + std::to_string(i) +
                                               " of a region with " +
                                               std::to_string(program->num_inputs()) + " inputs");
    }
  }
  RegionSource source;
  source.import = [program](const Tensors& inputs, const std::vector<size_t>& frozen) {
    return program->import(inputs, frozen);
  };
  source.weight_inputs = std::move(weights);
  source.fallback = std::move(fallback);
  source.fallback_in = RunsIn::Eager;
  source.op_names = program->op_names();
  source.declared_sizes = std::move(declared_sizes);
  return source;
}

RegionRunner::RegionRunner(RegionSource source, CompileOptions options, std::string name)
    : source_(std::move(source)), options_(std::move(options)), name_(std::move(name)) {}

std::shared_ptr<const CompiledRegion> RegionRunner::compile(
    const Tensors& inputs, const std::vector<size_t>& frozen) const {
  const auto start = std::chrono::steady_clock::now();
  const DebugClock clock(name_);
  ImportedGraph imported = source_.import(inputs, frozen);
  clock.step("imported");
  // Generated kernels record no autograd history: where a gradient must flow through the region
  // (a TorchScript module called on inputs that require grad), every op runs through ATen.
  const bool autograd = needs_autograd(inputs);
  CompileOptions options = options_;
  if (autograd) options.fusion = false;
  auto compiled = compile_graph(std::move(imported.graph), imported.constants, imported.device,
                                options, name_, !autograd);
  compiled->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

int RegionRunner::num_specializations() const {
  return cache_.size();
}

std::optional<SignatureKey> RegionRunner::key_of(const Tensors& inputs) const {
  SignatureKey key = signature_of(inputs);
  if (may_freeze(inputs)) {
    int64_t set = 0;
    if (!admit_weight_set(inputs, set)) return std::nullopt;
    key.push_back(set);
  }
  return key;
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::specialize(
    const Tensors& inputs) const {
  const std::optional<SignatureKey> key = key_of(inputs);
  if (!key) {
    return unfreeze(inputs, "its graph is called with more than " + std::to_string(kMaxWeightSets) +
                                " sets of weights (model instances)");
  }
  if (auto compiled = cache_.find(*key)) return remember(compiled);
  if (auto plan = classes_.plan(inputs)) return remember(plan);
  return remember(cache_.get(
      *key, options_.max_specializations, [&](int) { return compile_specialization(inputs); },
      [&] { return past_limit(); }));
}

bool RegionRunner::may_freeze(const Tensors& inputs) const {
  return !unfrozen_ && !source_.weight_inputs.empty() && !needs_autograd(inputs);
}

bool RegionRunner::admit_weight_set(const Tensors& inputs, int64_t& set) const {
  auto holds = [&](const std::vector<const c10::TensorImpl*>& weights) {
    for (size_t k = 0; k < weights.size(); ++k) {
      if (inputs.at(source_.weight_inputs[k]).unsafeGetTensorImpl() != weights[k]) return false;
    }
    return true;
  };
  std::lock_guard lock(weight_sets_mutex_);
  for (size_t s = 0; s < weight_sets_.size(); ++s) {
    if (holds(weight_sets_[s])) {
      set = static_cast<int64_t>(s);
      return true;
    }
  }
  if (static_cast<int>(weight_sets_.size()) >= kMaxWeightSets) return false;
  std::vector<const c10::TensorImpl*> weights;
  for (size_t i : source_.weight_inputs)
    weights.push_back(inputs.at(i).unsafeGetTensorImpl());
  weight_sets_.push_back(std::move(weights));
  set = static_cast<int64_t>(weight_sets_.size()) - 1;
  return true;
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::past_limit() const {
  if (!warned_limit_.exchange(true)) {
    record_fallback();
    log(LogLevel::Warn,
        name_ + ": more than max_specializations=" + std::to_string(options_.max_specializations) +
            " input signatures; new ones run in " + fallback_phrase(source_.fallback_in) +
            " (every new input size is a compile; the option allows more)");
  }
  auto spec = std::make_shared<Specialization>();
  spec->failure = "its region was not compiled: past max_specializations";
  return spec;
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::compile_specialization(
    const Tensors& inputs) const {
  auto spec = std::make_shared<Specialization>();
  // Not a failure to fall back from: the caller asked for what cannot be.
  check_inference_precision(options_, needs_autograd(inputs), name_);
  try {
    reject_undefined(inputs);
    std::vector<FrozenWeight> weights = weights_to_freeze(inputs);
    std::vector<size_t> frozen;
    for (const FrozenWeight& w : weights)
      frozen.push_back(w.input);
    if (!needs_autograd(inputs)) {
      // Kept by a class, to import its new members: `frozen` by value.
      auto import = [this, frozen](const Tensors& at) { return source_.import(at, frozen); };
      if (auto as_class =
              classes_.compile(inputs, weights, import, options_, name_, source_.declared_sizes))
        return as_class;
    }
    spec->compiled = compile(inputs, frozen);
    classes_.record(inputs, frozen);
    spec->frozen = std::move(weights);  // only a compiled plan holds them (a fallback does not)
    record_compiled(*spec->compiled);
    record_frozen_weights(static_cast<int64_t>(frozen.size()));
    return spec;
  } catch (const Error& e) {
    if (options_.strict) throw;
    spec->failure = std::string("its region was not compiled: ") + e.what();
    log(LogLevel::Warn,
        name_ + " runs in " + fallback_phrase(source_.fallback_in) + ": " + e.what());
  } catch (const std::exception& e) {
    // Compiling threw something that is not kiln's error: a bug in kiln, never the user's.
    const std::string why = name_ + ": compiling it threw " + e.what();
    if (options_.strict) throw Error(ErrorKind::Internal, why);
    spec->failure = "its region was not compiled: kiln failed (internal): " + std::string(e.what());
    log(LogLevel::Error, why + "; it runs in " + fallback_phrase(source_.fallback_in) +
                             " (results are unaffected; please report this as a kiln bug)");
  }
  record_fallback();
  return spec;
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::remember(
    std::shared_ptr<const Specialization> spec) const {
  std::lock_guard lock(last_mutex_);
  last_ = spec;
  return spec;
}

std::vector<RegionRunner::FrozenWeight> RegionRunner::weights_to_freeze(
    const Tensors& inputs) const {
  std::vector<FrozenWeight> frozen;
  if (unfrozen_ || needs_autograd(inputs) || disabled_names().contains("freeze_weights")) {
    return frozen;
  }
  for (size_t i : source_.weight_inputs) {
    const at::Tensor& t = inputs.at(i);
    // An inference tensor has no version counter to tell whether it changed.
    if (!t.defined() || t.is_inference() || t.is_mkldnn()) continue;
    frozen.push_back({i, t, t._version(), t.data_ptr()});
  }
  return frozen;
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::unfreeze(
    const Tensors& inputs, const std::string& why) const {
  if (!unfrozen_.exchange(true)) {
    record_unfrozen_region();
    log(LogLevel::Info, name_ + ": " + why + "; compiling again with the weights as inputs");
  }
  // Every frozen specialization goes: any of its constants may be stale.
  cache_.erase_if([](const Specialization& spec) { return !spec.frozen.empty(); });
  classes_.forget_frozen();
  return specialize(inputs);
}

Tensors RegionRunner::run(const Tensors& inputs) const {
  auto spec = specialize(inputs);
  auto stale = [&](const Specialization& s) {
    if (s.frozen.empty()) return false;
    if (needs_autograd(inputs)) return true;  // the constants carry no history
    return std::any_of(s.frozen.begin(), s.frozen.end(), [&](const FrozenWeight& w) {
      return !is_unchanged(inputs[w.input], w.tensor, w.version, w.data);
    });
  };
  // A loop: a frozen specialization another thread was still compiling may land in the cache.
  while (stale(*spec))
    spec = unfreeze(inputs, "a weight changed since it was compiled in");
  if (!spec->compiled) return source_.fallback(inputs);
  try {
    return run_plan(spec->compiled->plan, inputs);
  } catch (const std::exception& e) {
    return recover(inputs, *spec->compiled, e);
  }
}

Tensors RegionRunner::recover(const Tensors& inputs, const CompiledRegion& compiled,
                              const std::exception& failure) const {
  // Regions have no side effects (a plan never writes into its inputs), so the call can run
  // again the way it would without kiln. If that fails too, the error is the caller's: it
  // propagates as the fallback raised it, with its message, and the plan stays.
  Tensors outputs = source_.fallback(inputs);
  const std::string why = "its compiled plan failed where " + fallback_phrase(source_.fallback_in) +
                          " did not: " + failure.what();
  if (options_.strict) {
    const auto* error = dynamic_cast<const Error*>(&failure);
    const bool limit = error && error->kind() == ErrorKind::Unsupported;
    throw Error(limit ? ErrorKind::Unsupported : ErrorKind::Internal, name_ + ": " + why);
  }
  auto failed = std::make_shared<Specialization>();
  failed->failure = why;
  forget_graph(compiled.graph_key);  // nor kept for the next process: it would fail there too
  record_fallback();
  log(LogLevel::Warn, name_ + " runs in " + fallback_phrase(source_.fallback_in) +
                          " for these inputs from now on; " + why);
  // Under the key the plan was found by (with its weight set where it froze them), so that the
  // next call finds the failure, not the plan.
  if (const std::optional<SignatureKey> key = key_of(inputs)) cache_.put(*key, failed);
  remember(failed);
  return outputs;
}

void RegionRunner::explain_into(Explanation& explanation) const {
  std::shared_ptr<const Specialization> spec;
  {
    std::lock_guard lock(last_mutex_);
    spec = last_;
  }
  if (!spec) return;
  ++explanation.regions;
  if (spec->compiled) {
    for (const auto& entry : spec->compiled->entries)
      explanation.entries.push_back(entry);
    explanation.compile_seconds += spec->compiled->compile_seconds;
    explanation.codegen_seconds += spec->compiled->codegen_seconds;
    explanation.disk_cache_hits += spec->compiled->modules_loaded;
    explanation.disk_cache_misses += spec->compiled->modules - spec->compiled->modules_loaded;
    explanation.fused_kernels += spec->compiled->kernels;
    explanation.planned_bytes += spec->compiled->plan.arena_bytes;
    explanation.unshared_bytes += spec->compiled->plan.unshared_bytes;
    explanation.in_place_writes += spec->compiled->plan.in_place_writes;
    explanation.channels_last_conversions += spec->compiled->plan.layout_conversions;
    return;
  }
  ++explanation.fallback_regions;
  for (const std::string& op : source_.op_names)
    explanation.entries.push_back({op, source_.fallback_in, spec->failure});
}

}  // namespace kiln
