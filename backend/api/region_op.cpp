// The kiln::Region operator: how the TorchScript interpreter calls a compiled region. Each
// region node carries the id of its RegionRunner; the registry maps ids to runners for as long
// as the specialization that owns them lives.
#include <torch/csrc/jit/runtime/custom_operator.h>

#include <atomic>
#include <optional>
#include <string_view>

#include "backend/api/region.h"
#include "backend/capture/partition.h"

namespace kiln {
namespace {

std::mutex registry_mutex;
std::unordered_map<int64_t, std::weak_ptr<RegionRunner>>& registry() {
  static std::unordered_map<int64_t, std::weak_ptr<RegionRunner>> runners;
  return runners;
}

torch::jit::Operation create_region_operation(const torch::jit::Node* node) {
  std::shared_ptr<RegionRunner> runner;
  {
    std::lock_guard lock(registry_mutex);
    auto found = registry().find(node->i(region_id_attr()));
    if (found != registry().end()) runner = found->second.lock();
  }
  TORCH_CHECK(runner, "kiln::Region node without a live runner");
  const size_t num_inputs = node->inputs().size();
  return [runner, num_inputs](torch::jit::Stack& stack) {
    std::vector<at::Tensor> inputs;
    inputs.reserve(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) {
      inputs.push_back(torch::jit::peek(stack, i, num_inputs).toTensor());
    }
    torch::jit::drop(stack, num_inputs);
    std::vector<at::Tensor> outputs;
    try {
      outputs = runner->run(inputs);
    } catch (const Error& e) {
      keep_region_error(e);
      throw;
    }
    for (auto& output : outputs)
      stack.emplace_back(std::move(output));
  };
}

thread_local std::optional<Error> region_error;

// The interpreter must not reorder or drop region nodes: CONSERVATIVE alias analysis treats them
// as reading and writing everything they touch.
torch::jit::RegisterOperators register_region({torch::jit::Operator(
    region_symbol(), create_region_operation, c10::AliasAnalysisKind::CONSERVATIVE)});

}  // namespace

void keep_region_error(const Error& error) {
  region_error = error;
}

void clear_region_error() {
  region_error.reset();
}

std::optional<Error> take_region_error(const std::exception& rethrown) {
  std::optional<Error> kept;
  kept.swap(region_error);
  // The interpreter's message quotes the original's; anything else is another error.
  if (kept && std::string_view(rethrown.what()).find(kept->what()) == std::string_view::npos)
    kept.reset();
  return kept;
}

c10::Symbol region_id_attr() {
  static const c10::Symbol symbol = c10::Symbol::attr("region_id");
  return symbol;
}

int64_t register_region_runner(std::shared_ptr<RegionRunner> runner) {
  static std::atomic<int64_t> next_id{1};
  const int64_t id = next_id++;
  std::lock_guard lock(registry_mutex);
  registry()[id] = runner;
  return id;
}

void unregister_region_runner(int64_t id) {
  std::lock_guard lock(registry_mutex);
  registry().erase(id);
}

}  // namespace kiln
