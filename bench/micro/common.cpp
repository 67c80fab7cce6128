#include "common.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>

#include "kiln/kiln.h"

namespace kiln_micro {
namespace {

constexpr double kTolerance = 1e-4;

std::string& models_dir_storage() {
  static std::string dir = [] {
    const char* env = std::getenv("KILN_BENCH_MODELS");
    return std::string(env && *env ? env : KILN_BENCH_MODELS_DEFAULT);
  }();
  return dir;
}

// One model, its inputs and its eager output, loaded once and shared by the runners.
struct Loaded {
  torch::jit::Module module;
  std::vector<c10::IValue> inputs;
  at::Tensor expected;
};

const Loaded& load(const ModelCase& model) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto it = cache.find(model.name);
  if (it != cache.end()) return *it->second;
  const std::string path = models_dir() + "/" + model.name + ".pt";
  auto loaded = std::make_unique<Loaded>();
  try {
    loaded->module = torch::jit::load(path);
  } catch (const std::exception&) {
    throw std::runtime_error(
        "cannot load " + path +
        " (write the models with: .venv/bin/python bench/make_kernel_models.py " + models_dir() +
        "; make bench-micro does)");
  }
  loaded->module.eval();
  torch::manual_seed(0);
  for (const auto& shape : model.input_shapes)
    loaded->inputs.push_back(torch::randn(shape));
  loaded->expected = loaded->module.forward(loaded->inputs).toTensor();
  return *cache.emplace(model.name, std::move(loaded)).first->second;
}

// A compiled module, its first (compiling) call and its check against eager done, and its label.
struct Compiled {
  kiln::CompiledModule module;
  std::string label;
};

const Compiled& compile(const ModelCase& model, const Loaded& loaded, Runner runner) {
  static std::map<std::pair<std::string, Runner>, std::unique_ptr<Compiled>> cache;
  const auto key = std::make_pair(std::string(model.name), runner);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  kiln::CompileOptions options =
      kiln::CompileOptions::parse(runner == Runner::KilnNoFusion ? "fusion=false" : "");
  options.example_inputs = loaded.inputs;
  kiln::CompiledModule compiled = kiln::compile(loaded.module, options);
  const at::Tensor actual = compiled.forward(loaded.inputs).toTensor();
  const double diff = (actual - loaded.expected).abs().max().item<double>();
  if (!(diff <= kTolerance)) {
    std::ostringstream message;
    message << model.name << ": kiln differs from eager by " << diff;
    throw std::runtime_error(message.str());
  }
  const kiln::Explanation explanation = compiled.explain(loaded.inputs);
  std::ostringstream label;
  label << explanation.fused_kernels << " kernels, " << explanation.extern_calls << " extern";
  auto entry = std::make_unique<Compiled>(Compiled{std::move(compiled), label.str()});
  return *cache.emplace(key, std::move(entry)).first->second;
}

}  // namespace

const std::string& models_dir() {
  return models_dir_storage();
}
void set_models_dir(std::string dir) {
  models_dir_storage() = std::move(dir);
}

int64_t float_bytes(const std::vector<int64_t>& shape) {
  int64_t n = static_cast<int64_t>(sizeof(float));
  for (int64_t d : shape)
    n *= d;
  return n;
}

void run_model(benchmark::State& state, const ModelCase& model, Runner runner) {
  torch::NoGradGuard no_grad;
  const Loaded* loaded = nullptr;
  const Compiled* compiled = nullptr;
  try {
    loaded = &load(model);
    if (runner != Runner::Eager) compiled = &compile(model, *loaded, runner);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  // Both forwards take the inputs by value: each call copies the vector (a few refcounts).
  if (compiled) {
    for (auto _ : state)
      benchmark::DoNotOptimize(compiled->module.forward(loaded->inputs));
    state.SetLabel(compiled->label);
  } else {
    torch::jit::Module module = loaded->module;  // a handle; forward is not const
    for (auto _ : state)
      benchmark::DoNotOptimize(module.forward(loaded->inputs));
  }
  if (model.bytes_per_call > 0) state.SetBytesProcessed(state.iterations() * model.bytes_per_call);
}

void big_case(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void small_case(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace kiln_micro
