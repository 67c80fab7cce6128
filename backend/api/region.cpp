#include "backend/api/region.h"

#include <chrono>

#include "backend/api/environment.h"
#include "backend/capture/import_graph.h"
#include "runtime/executor.h"

namespace kiln {
namespace {

bool needs_autograd(const std::vector<at::Tensor>& inputs) {
  if (!at::GradMode::is_enabled()) return false;
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const at::Tensor& t) { return t.defined() && t.requires_grad(); });
}

}  // namespace

std::shared_ptr<const CompiledRegion> compile_region(const torch::jit::Graph& region,
                                                     const std::vector<at::Tensor>& inputs,
                                                     const CompileOptions& options,
                                                     const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  ImportedGraph imported = import_region(region, inputs);
  auto compiled = compile_graph(std::move(imported.graph), imported.constants, imported.device,
                                options, name, !needs_autograd(inputs));
  compiled->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

RegionRunner::RegionRunner(std::shared_ptr<torch::jit::Graph> region, CompileOptions options,
                           std::string name)
    : region_(std::move(region)),
      options_(std::move(options)),
      name_(std::move(name)),
      fallback_(region_, name_) {}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::specialize(
    const std::vector<at::Tensor>& inputs) const {
  SignatureKey key = signature_of(inputs);
  {
    std::shared_lock lock(mutex_);
    if (auto found = cache_.find(key); found != cache_.end()) return remember(found->second);
  }
  std::unique_lock lock(mutex_);
  if (auto found = cache_.find(key); found != cache_.end()) return remember(found->second);
  if (static_cast<int>(cache_.size()) >= options_.max_specializations) {
    if (!warned_limit_) {
      warned_limit_ = true;
      log(LogLevel::Warn, name_ + ": more than max_specializations=" +
                              std::to_string(options_.max_specializations) +
                              " input signatures; new ones run in the TorchScript interpreter");
    }
    auto spec = std::make_shared<Specialization>();
    spec->failure = "past max_specializations";
    return remember(spec);
  }
  auto spec = std::make_shared<Specialization>();
  try {
    spec->compiled = compile_region(*region_, inputs, options_, name_);
  } catch (const Error& e) {
    if (options_.strict) throw;
    spec->failure = e.what();
    log(LogLevel::Warn, name_ + " runs in the TorchScript interpreter: " + spec->failure);
  }
  cache_.emplace(std::move(key), spec);
  return remember(spec);
}

std::shared_ptr<const RegionRunner::Specialization> RegionRunner::remember(
    std::shared_ptr<const Specialization> spec) const {
  std::lock_guard lock(last_mutex_);
  last_ = spec;
  return spec;
}

std::vector<at::Tensor> RegionRunner::interpret(const std::vector<at::Tensor>& inputs) const {
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  torch::jit::InterpreterState(fallback_).run(stack);
  std::vector<at::Tensor> outputs;
  for (auto& value : stack)
    outputs.push_back(value.toTensor());
  return outputs;
}

std::vector<at::Tensor> RegionRunner::run(const std::vector<at::Tensor>& inputs) const {
  auto spec = specialize(inputs);
  if (!spec->compiled) return interpret(inputs);
  try {
    return run_plan(spec->compiled->plan, inputs);
  } catch (const Error& e) {
    // The plan found out at run time that it cannot serve these inputs (an op without a meta
    // kernel changed its output shape). Regions have no side effects, so running the region
    // again in the interpreter is safe; this signature stays there from now on.
    if (e.kind() != ErrorKind::Unsupported || options_.strict) throw;
    auto failed = std::make_shared<Specialization>();
    failed->failure = e.what();
    log(LogLevel::Warn,
        name_ + " runs in the TorchScript interpreter from now on: " + failed->failure);
    {
      std::unique_lock lock(mutex_);
      cache_[signature_of(inputs)] = failed;
    }
    remember(failed);
    return interpret(inputs);
  }
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
    explanation.fused_kernels += spec->compiled->kernels;
    explanation.planned_bytes += spec->compiled->plan.arena_bytes;
    explanation.unshared_bytes += spec->compiled->plan.unshared_bytes;
    return;
  }
  ++explanation.fallback_regions;
  for (const torch::jit::Node* node : region_->nodes()) {
    if (node->kind() == c10::prim::Constant || node->kind() == c10::prim::ListConstruct) continue;
    explanation.entries.push_back({node->kind().toQualString(), "TorchScript interpreter",
                                   "its region was not compiled: " + spec->failure});
  }
}

}  // namespace kiln
