#include "backend/api/specialization.h"

#include <filesystem>
#include <fstream>

#include "backend/api/environment.h"
#include "backend/capture/partition.h"
#include "backend/capture/specialize_graph.h"

namespace kiln {
namespace {

void collect_regions(torch::jit::Block* block, std::vector<torch::jit::Node*>& regions) {
  for (torch::jit::Node* node : block->nodes()) {
    if (node->kind() == region_symbol()) regions.push_back(node);
    for (torch::jit::Block* inner : node->blocks())
      collect_regions(inner, regions);
  }
}

int count_interpreter_nodes(const torch::jit::Block* block) {
  int count = 0;
  for (const torch::jit::Node* node : block->nodes()) {
    if (node->kind() != c10::prim::Constant && node->kind() != region_symbol()) ++count;
    for (const torch::jit::Block* inner : node->blocks())
      count += count_interpreter_nodes(inner);
  }
  return count;
}

void explain_interpreter_nodes(const torch::jit::Block* block, Explanation& explanation) {
  for (const torch::jit::Node* node : block->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::Constant || kind == region_symbol()) continue;
    auto why = interpreter_reason(node);
    explanation.entries.push_back(
        {kind.toQualString(), RunsIn::Interpreter, why ? *why : "between regions"});
    for (const torch::jit::Block* inner : node->blocks())
      explain_interpreter_nodes(inner, explanation);
  }
}

}  // namespace

Specialization::Specialization(const CapturedModule& captured, const CompileOptions& options,
                               const std::string& name, const std::vector<c10::IValue>& inputs,
                               const std::vector<std::vector<int>>& varying_dims)
    : graph_(captured.graph->copy()) {
  specialize_graph(graph_, captured.frozen, inputs, varying_dims);
  partition_into_regions(*graph_);
  std::vector<torch::jit::Node*> regions;
  collect_regions(graph_->block(), regions);
  for (size_t i = 0; i < regions.size(); ++i) {
    auto runner =
        std::make_shared<RegionRunner>(torchscript_region(regions[i]->g(c10::attr::Subgraph)),
                                       options, name + "-region" + std::to_string(i));
    const int64_t id = register_region_runner(runner);
    regions[i]->i_(region_id_attr(), id);
    runners_.push_back(runner);
    runner_ids_.push_back(id);
  }
  const std::string dump_dir = options.dump_dir.empty() ? environment().dump_dir : options.dump_dir;
  if (!dump_dir.empty()) {
    std::filesystem::create_directories(dump_dir);
    std::ofstream(std::filesystem::path(dump_dir) / (name + ".torchscript")) << graph_->toString();
  }
  interpreter_nodes_ = count_interpreter_nodes(graph_->block());
  direct_ = find_direct_route();
  if (!direct_) code_ = std::make_unique<torch::jit::Code>(graph_, "forward");
}

std::shared_ptr<const Specialization> Specialization::uncompiled(std::string reason) {
  std::shared_ptr<Specialization> spec(new Specialization());
  spec->uncompiled_reason_ = std::move(reason);
  return spec;
}

Specialization::~Specialization() {
  for (int64_t id : runner_ids_)
    unregister_region_runner(id);
}

std::unique_ptr<Specialization::DirectRoute> Specialization::find_direct_route() const {
  if (runners_.size() != 1) return nullptr;
  torch::jit::Node* region = nullptr;
  torch::jit::Node* tuple = nullptr;
  for (torch::jit::Node* node : graph_->nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    if (node->kind() == region_symbol())
      region = node;
    else if (node->kind() == c10::prim::TupleConstruct && !tuple)
      tuple = node;
    else
      return nullptr;
  }
  const auto& returns = graph_->outputs();
  if (returns.size() != 1) return nullptr;
  auto route = std::make_unique<DirectRoute>();
  route->runner = runners_[0];
  for (const torch::jit::Value* in : region->inputs()) {
    const auto& args = graph_->inputs();
    auto found = std::find(args.begin() + 1, args.end(), in);  // input 0 is self
    if (found == args.end()) return nullptr;
    route->argument_of_input.push_back(found - args.begin() - 1);
  }
  std::vector<torch::jit::Value*> returned = {returns[0]};
  if (tuple) {
    if (returns[0] != tuple->output()) return nullptr;
    returned.assign(tuple->inputs().begin(), tuple->inputs().end());
    route->returns_tuple = true;
  }
  for (const torch::jit::Value* value : returned) {
    if (value->node() != region) return nullptr;
    route->returned_outputs.push_back(value->offset());
  }
  return route;
}

bool Specialization::prepare(const std::vector<c10::IValue>& inputs) const {
  if (!direct_) return false;
  std::vector<at::Tensor> tensors;
  for (size_t arg : direct_->argument_of_input)
    tensors.push_back(inputs[arg].toTensor());
  direct_->runner->prepare(tensors);
  return true;
}

c10::IValue Specialization::run(const CapturedModule& captured,
                                std::vector<c10::IValue> inputs) const {
  if (!uncompiled_reason_.empty())
    return torch::jit::Module(captured.frozen).forward(std::move(inputs));
  if (direct_) {
    std::vector<at::Tensor> tensors;
    tensors.reserve(direct_->argument_of_input.size());
    for (size_t arg : direct_->argument_of_input)
      tensors.push_back(inputs[arg].toTensor());
    std::vector<at::Tensor> outputs = direct_->runner->run(tensors);
    if (!direct_->returns_tuple) return outputs.at(direct_->returned_outputs[0]);
    std::vector<c10::IValue> items;
    for (size_t i : direct_->returned_outputs)
      items.emplace_back(outputs.at(i));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  torch::jit::Stack stack;
  stack.reserve(inputs.size() + 1);
  stack.emplace_back(captured.frozen._ivalue());
  for (auto& input : inputs)
    stack.push_back(std::move(input));
  torch::jit::InterpreterState(*code_).run(stack);
  return stack.back();
}

void Specialization::explain_into(Explanation& explanation) const {
  if (!uncompiled_reason_.empty()) {
    explanation.entries.push_back({"forward", RunsIn::Interpreter, uncompiled_reason_});
    return;
  }
  if (!direct_) explain_interpreter_nodes(graph_->block(), explanation);
  for (const auto& runner : runners_)
    runner->explain_into(explanation);
}

}  // namespace kiln
