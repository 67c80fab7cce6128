#include "runtime/plan_builder.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/jit_type.h>

#include "kiln/error.h"
#include "passes/ir/op_table.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/in_place_extern.h"
#include "runtime/step_label.h"

namespace kiln {
namespace {

std::optional<c10::OperatorHandle> lookup(const std::string& name, const std::string& overload) {
  return c10::Dispatcher::singleton().findSchema({name, overload});
}

c10::OperatorHandle find_operator(const std::string& qualified) {
  auto sep = qualified.find("::");
  auto dot = qualified.find('.', sep == std::string::npos ? 0 : sep);
  std::string name = qualified.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
  if (auto handle = lookup(name, overload)) return *handle;
  throw Error(ErrorKind::Unsupported, "ATen's dispatcher has no operator '" + qualified + "'");
}

// The out= overload of `op`: same arguments, plus one trailing `Tensor(a!) out`.
std::optional<c10::OperatorHandle> find_out_variant(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  std::vector<std::string> candidates;
  if (!schema.overload_name().empty()) candidates.push_back(schema.overload_name() + "_out");
  candidates.push_back("out");
  for (const auto& overload : candidates) {
    auto handle = lookup(schema.name(), overload);
    if (!handle) continue;
    const auto& out_args = handle->schema().arguments();
    const auto& args = schema.arguments();
    if (out_args.size() != args.size() + 1 || !out_args.back().is_out()) continue;
    bool same = true;
    for (size_t i = 0; i < args.size() && same; ++i) {
      same = args[i].name() == out_args[i].name() && *args[i].type() == *out_args[i].type();
    }
    if (same && handle->schema().returns().size() == 1) return handle;
  }
  return std::nullopt;
}

// A view op's output as an as_strided of its input: the op run once on a meta tensor of the
// input's layout. Only where the output aliases the input in the IR's layout (has_layout: strides
// of size-1 dims do not matter; a reshape that copies does not qualify); the as_strided then
// takes the IR's strides.
std::optional<ExternStep::View> as_view(const ExternStep& step, const ir::Node& node) {
  const c10::FunctionSchema& schema = step.op.schema();
  if (schema.is_mutable() || schema.returns().size() != 1 || node.outputs().size() != 1 ||
      node.inputs().size() != 1 || step.tensor_args.size() != 1 || !step.tensor_list_args.empty() ||
      step.out_position >= 0 || !step.expected_sizes.empty()) {
    return std::nullopt;
  }
  const c10::AliasInfo* alias = schema.returns()[0].alias_info();
  if (!alias || alias->isWrite()) return std::nullopt;
  const ir::TensorType& in = node.input(0)->type();
  const ir::TensorType& out = node.output()->type();
  try {
    const at::Tensor meta = at::empty_strided(
        in.sizes, in.strides, at::TensorOptions().dtype(to_aten_dtype(in.dtype)).device(at::kMeta));
    torch::jit::Stack stack = step.stack_template;
    stack[step.tensor_args[0].position] = meta;
    step.op.callBoxed(stack);
    const at::Tensor result = stack.at(0).toTensor();
    if (!result.is_alias_of(meta) || !has_layout(result, out)) {
      return std::nullopt;
    }
    return ExternStep::View{in, out.sizes, out.strides, result.storage_offset()};
  } catch (const std::exception&) {
    return std::nullopt;  // no meta kernel: the boxed call it is
  }
}

ExternStep build_step(const ir::Node& node, const MemoryPlan& memory) {
  c10::OperatorHandle functional = find_operator(node.op());
  ExternStep step{functional, node.op()};
  step.label = label_extern_node(node);
  const bool planned = node.outputs().size() == 1 && memory.is_planned(node.output());
  if (planned) {
    auto out = find_out_variant(functional);
    if (!out) {
      throw Error(ErrorKind::Internal, "memory plan expects an out= variant of " + node.op());
    }
    step.op = *out;
  }
  size_t next_input = 0;
  auto take_input = [&]() {
    if (next_input >= node.inputs().size()) {
      throw Error(ErrorKind::Internal, node.op() + " has fewer tensor inputs than its schema");
    }
    return node.input(next_input++)->id();
  };
  for (const c10::Argument& arg : functional.schema().arguments()) {
    const int position = static_cast<int>(step.stack_template.size());
    const ir::Attr* attr = node.find_attr(arg.name());
    const c10::TypePtr& type = arg.real_type();
    if (is_tensor_type(type) || (is_optional_tensor_type(type) && !attr)) {
      step.tensor_args.push_back({position, take_input()});
      step.stack_template.emplace_back();
    } else if (is_tensor_list_type(type)) {
      const int64_t* count = attr ? std::get_if<int64_t>(attr) : nullptr;
      if (!count) throw Error(ErrorKind::Internal, node.op() + ": no count for " + arg.name());
      ExternStep::TensorListArg list{position, {}};
      for (int64_t i = 0; i < *count; ++i)
        list.values.push_back(take_input());
      step.tensor_list_args.push_back(std::move(list));
      step.stack_template.emplace_back();
    } else if (is_optional_tensor_list_type(type)) {
      const auto* present = attr ? std::get_if<std::vector<bool>>(attr) : nullptr;
      if (!present) {
        throw Error(ErrorKind::Internal, node.op() + ": no element flags for " + arg.name());
      }
      ExternStep::TensorListArg list{position, {}, /*optional=*/true};
      for (bool element : *present)
        list.values.push_back(element ? take_input() : -1);
      step.tensor_list_args.push_back(std::move(list));
      step.stack_template.emplace_back();
    } else if (attr) {
      step.stack_template.push_back(ivalue_from_attr(*attr, arg));
    } else if (arg.default_value()) {
      step.stack_template.push_back(*arg.default_value());
    } else {
      throw Error(ErrorKind::Internal, node.op() + ": no value for argument '" + arg.name() + "'");
    }
  }
  if (next_input != node.inputs().size()) {
    throw Error(ErrorKind::Internal, node.op() + " has more tensor inputs than its schema");
  }
  if (planned) {
    step.out_position = static_cast<int>(step.stack_template.size());
    step.stack_template.emplace_back();
  }
  for (const ir::Value* output : node.outputs())
    step.outputs.push_back(output->id());
  if (node.find_attr(ir::kSampledShapeAttr)) {
    for (const ir::Value* output : node.outputs())
      step.expected_sizes.push_back(output->type().sizes);
  }
  step.view = as_view(step, node);
  // A view step's output aliases its input (as_view asks the schema the same).
  const auto& returns = functional.schema().returns();
  for (size_t i = 0; i < node.outputs().size(); ++i) {
    const bool fresh = !planned && !(i < returns.size() && returns[i].alias_info());
    step.fresh_layouts.push_back(fresh ? std::optional(node.output(i)->type()) : std::nullopt);
  }
  return step;
}

KernelStep build_kernel_step(const ir::Node& node, const std::vector<CompiledKernel>& kernels,
                             const MemoryPlan& memory) {
  const auto* index = std::get_if<int64_t>(node.find_attr("kernel"));
  if (!index || *index < 0 || *index >= static_cast<int64_t>(kernels.size())) {
    throw Error(ErrorKind::Internal, "a fused node without a compiled kernel");
  }
  if (kernels[*index].launch_at) {
    // A plan has concrete sizes: a size-generic kernel must come bound to them, its launch and
    // size values set (instantiate_class does it).
    throw Error(ErrorKind::Internal, "a size-generic kernel not bound to the plan's sizes");
  }
  KernelStep step;
  step.name = "kernel " + std::to_string(*index);
  step.label = label_fused_node(node);
  step.kernel = kernels[*index];
  auto offset = [&](const ir::Value* v) {
    return memory.is_planned(v) ? *memory.offsets[v->id()] : -1;
  };
  for (const ir::Value* v : node.inputs()) {
    step.inputs.push_back(v->id());
    step.input_offsets.push_back(offset(v));
    step.input_types.push_back(v->type());
  }
  for (const ir::Value* v : node.outputs()) {
    step.outputs.push_back(v->id());
    step.output_offsets.push_back(offset(v));
    step.output_types.push_back(v->type());
  }
  return step;
}

// The slots a step reads and writes.
template <typename F>
void for_each_slot(const Step& step, F visit) {
  if (const auto* e = std::get_if<ExternStep>(&step)) {
    for (const auto& arg : e->tensor_args)
      visit(arg.value);
    for (const auto& list : e->tensor_list_args)
      for (int v : list.values)
        if (v >= 0) visit(v);
    for (int v : e->outputs)
      visit(v);
  } else {
    const auto& k = std::get<KernelStep>(step);
    for (int v : k.inputs)
      visit(v);
    for (int v : k.outputs)
      visit(v);
  }
}

}  // namespace

bool can_write_into_buffer(const ir::Node& node) {
  if (node.op() == ir::kFusedOp) return true;  // a kernel writes wherever it is told
  const ir::OpInfo* info = ir::find_op(node.op());
  if (!info || !info->writes_to_planned_buffer || node.outputs().size() != 1) return false;
  return find_out_variant(find_operator(node.op())).has_value();
}

Plan build_plan(const ir::Graph& graph, const std::vector<at::Tensor>& constants,
                const MemoryPlan& memory, c10::Device device,
                const std::vector<CompiledKernel>& kernels, std::shared_ptr<void> code) {
  Plan plan;
  plan.code = std::move(code);
  plan.num_values = graph.num_values();
  plan.device = device;
  for (const ir::Value* v : graph.inputs())
    plan.inputs.push_back(v->id());
  for (const ir::Value* v : graph.outputs())
    plan.outputs.push_back(v->id());

  for (const ir::Node* node : graph.nodes()) {
    if (node->op() == ir::kConstantOp) {
      const auto* index = std::get_if<int64_t>(node->find_attr("index"));
      if (!index || *index < 0 || *index >= static_cast<int64_t>(constants.size())) {
        throw Error(ErrorKind::Internal, "prim::Constant without a valid index");
      }
      plan.constants.emplace_back(node->output()->id(), constants[*index]);
      continue;
    }
    if (node->op() == ir::kFusedOp) {
      plan.steps.push_back(build_kernel_step(*node, kernels, memory));
    } else {
      plan.steps.push_back(build_step(*node, memory));
    }
  }

  // Release each intermediate after its last reader; graph outputs are never released.
  std::vector<int> last_reader(plan.num_values, -1);
  std::vector<bool> keep(plan.num_values, false);
  for (int id : plan.outputs)
    keep[id] = true;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for_each_slot(plan.steps[i], [&](int v) { last_reader[v] = static_cast<int>(i); });
  }
  for (int v = 0; v < plan.num_values; ++v) {
    if (keep[v] || last_reader[v] < 0) continue;
    std::visit([&](auto& step) { step.release.push_back(v); }, plan.steps[last_reader[v]]);
  }

  choose_in_place_externs(plan, graph, memory);

  for (int v = 0; v < static_cast<int>(memory.offsets.size()); ++v) {
    if (memory.offsets[v]) plan.planned.push_back({v, *memory.offsets[v], {}});
  }
  std::vector<const ir::Value*> by_id(plan.num_values, nullptr);
  for (const ir::Node* node : graph.nodes())
    for (const ir::Value* out : node->outputs())
      by_id[out->id()] = out;
  for (auto& buffer : plan.planned)
    buffer.type = by_id.at(buffer.value)->type();
  // A planned value that only kernels touch needs no tensor at run time.
  std::vector<bool> extern_touches(plan.num_values, false);
  for (const Step& step : plan.steps) {
    if (std::holds_alternative<ExternStep>(step))
      for_each_slot(step, [&](int v) { extern_touches[v] = true; });
  }
  for (auto& buffer : plan.planned)
    buffer.needs_tensor = extern_touches[buffer.value];
  plan.arena_bytes = memory.arena_bytes;
  plan.unshared_bytes = memory.unshared_bytes;
  plan.in_place_writes = static_cast<int>(memory.in_place.size());
  return plan;
}

}  // namespace kiln
