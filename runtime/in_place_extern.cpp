#include "runtime/in_place_extern.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>

namespace kiln {
namespace {

bool is_written(const c10::Argument& arg) {
  return arg.alias_info() && arg.alias_info()->isWrite();
}

}  // namespace

std::optional<ExternStep::InPlace> find_in_place_overload(const c10::OperatorHandle& functional) {
  const c10::FunctionSchema& schema = functional.schema();
  auto handle = c10::Dispatcher::singleton().findSchema(
      {schema.name() + "_", std::string(schema.overload_name())});
  if (!handle) return std::nullopt;
  const c10::FunctionSchema& in_place = handle->schema();
  const auto& args = schema.arguments();
  const auto& in_place_args = in_place.arguments();
  if (in_place_args.size() != args.size() || in_place.returns().size() != 1 ||
      !is_written(in_place.returns()[0])) {
    return std::nullopt;
  }
  ExternStep::InPlace found{*handle, {}};
  for (const c10::Argument& arg : in_place_args) {
    auto same = std::find_if(args.begin(), args.end(), [&](const c10::Argument& a) {
      return a.name() == arg.name() && *a.type() == *arg.type();
    });
    if (same == args.end() || is_written(*same)) return std::nullopt;
    const int position = static_cast<int>(same - args.begin());
    if (is_written(arg)) {
      if (found.written_position >= 0 || !arg.type()->isSubtypeOf(*c10::TensorType::get())) {
        return std::nullopt;
      }
      found.written_position = position;
    }
    found.order.push_back(position);
  }
  if (found.written_position < 0) return std::nullopt;
  return found;
}

void choose_in_place_externs(Plan& plan, const ir::Graph& graph, const MemoryPlan& memory) {
  std::vector<const ir::Value*> by_id(plan.num_values, nullptr);
  for (const ir::Value* v : graph.inputs())
    by_id[v->id()] = v;
  for (const ir::Node* node : graph.nodes())
    for (const ir::Value* out : node->outputs())
      by_id[out->id()] = out;
  std::vector<bool> excluded(plan.num_values, false);  // inputs, outputs, constants
  for (int v : plan.inputs)
    excluded[v] = true;
  for (int v : plan.outputs)
    excluded[v] = true;
  for (const auto& [slot, tensor] : plan.constants)
    excluded[slot] = true;

  for (Step& any : plan.steps) {
    auto* step = std::get_if<ExternStep>(&any);
    if (!step || step->out_position >= 0 || step->outputs.size() != 1) continue;
    std::optional<ExternStep::InPlace> in_place = find_in_place_overload(step->op);
    if (!in_place) continue;
    auto arg = std::find_if(step->tensor_args.begin(), step->tensor_args.end(), [&](const auto& a) {
      return a.position == in_place->written_position;
    });
    if (arg == step->tensor_args.end()) continue;
    const int input = arg->value;
    const bool passed_once =
        std::count_if(step->tensor_args.begin(), step->tensor_args.end(),
                      [&](const auto& a) { return a.value == input; }) == 1 &&
        std::none_of(step->tensor_list_args.begin(), step->tensor_list_args.end(),
                     [&](const auto& list) {
                       return std::count(list.values.begin(), list.values.end(), input) > 0;
                     });
    const bool dies_here =
        std::find(step->release.begin(), step->release.end(), input) != step->release.end();
    const ir::Value* in = by_id[input];
    const ir::Value* out = by_id[step->outputs[0]];
    if (excluded[input] || !passed_once || !dies_here || !in || !out || memory.is_planned(in) ||
        !(in->type() == out->type())) {
      continue;
    }
    in_place->input = input;
    step->in_place = std::move(in_place);
  }
}

bool is_sole_owner(const at::Tensor& input) {
  return input.defined() && input.use_count() == 1 && input.storage().use_count() == 1 &&
         !input.requires_grad();
}

}  // namespace kiln
