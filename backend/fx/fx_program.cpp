#include "backend/fx/fx_program.h"

#include <unordered_map>

#include "backend/capture/partition.h"
#include "kiln/error.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln {

c10::OperatorHandle find_operator(const std::string& op) {
  // "aten::add.Tensor" -> ("aten::add", "Tensor"); "aten::relu" -> ("aten::relu", "").
  const size_t ns_end = op.find("::");
  const size_t dot = op.find('.', ns_end == std::string::npos ? 0 : ns_end);
  const std::string name = op.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : op.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle) {
    throw Error(ErrorKind::Unsupported, op + " is not an operator in ATen's dispatcher");
  }
  return *handle;
}

std::optional<std::string> operator_problem(const std::string& op) {
  try {
    return schema_problem(find_operator(op).schema());
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

int64_t FxProgram::constant(const at::Tensor& tensor) {
  constants_.emplace_back(next_ref_, tensor);
  return next_ref_++;
}

int64_t FxProgram::checked_ref(int64_t ref) const {
  if (ref < 0 || ref >= next_ref_) {
    throw Error(ErrorKind::Internal, "FX reference " + std::to_string(ref) + " is not defined");
  }
  return ref;
}

std::vector<int64_t> FxProgram::call(const c10::OperatorHandle& op, std::vector<Arg> args) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string name = qualified_op_name(schema);
  if (auto problem = schema_problem(schema))
    throw Error(ErrorKind::Unsupported, name + " " + *problem);
  if (args.size() != schema.arguments().size()) {
    throw Error(ErrorKind::Internal, name + " called with " + std::to_string(args.size()) +
                                         " arguments, its schema has " +
                                         std::to_string(schema.arguments().size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (const auto* value = std::get_if<c10::IValue>(&args[i]);
        value && !attr_from_ivalue(*value)) {
      throw Error(ErrorKind::Unsupported, name + "'s argument '" + schema.arguments()[i].name() +
                                              "' is a constant of type " +
                                              schema.arguments()[i].type()->str() +
                                              " that the graph IR cannot hold");
    }
  }
  Call call{op, std::move(args), {}};
  for (size_t i = 0; i < schema.returns().size(); ++i)
    call.outputs.push_back(next_ref_++);
  calls_.push_back(std::move(call));
  return calls_.back().outputs;
}

ImportedGraph FxProgram::import(const std::vector<at::Tensor>& inputs,
                                const std::vector<size_t>& frozen) const {
  if (static_cast<int64_t>(inputs.size()) != num_inputs_) {
    throw Error(ErrorKind::Internal, "FX region called with " + std::to_string(inputs.size()) +
                                         " inputs, expects " + std::to_string(num_inputs_));
  }
  OpImporter ops(inputs);
  std::unordered_map<int64_t, ir::Value*> values;
  for (int64_t i = 0; i < num_inputs_; ++i)
    values[i] = ops.input(i);
  // A frozen weight stays a (now unread) graph input, so the plan's inputs are the region's.
  for (size_t i : frozen)
    values[static_cast<int64_t>(i)] = ops.add_constant(inputs.at(i));
  for (const auto& [ref, tensor] : constants_)
    values[ref] = ops.add_constant(tensor);
  auto size_of = [&](int64_t ref, int64_t dim) -> int64_t {
    const ir::Value* value = values.at(ref);
    if (!value) throw Error(ErrorKind::Internal, "a size expression reads an uncomputed output");
    const at::Tensor& meta = ops.meta(value);
    if (dim < 0 || dim >= meta.dim()) {
      throw Error(ErrorKind::Internal, "a size expression reads dimension " + std::to_string(dim) +
                                           " of a " + std::to_string(meta.dim()) + "-d value");
    }
    return meta.size(dim);
  };
  for (const Call& call : calls_) {
    std::vector<ImportArg> args;
    for (const Arg& arg : call.args) {
      if (const auto* ref = std::get_if<int64_t>(&arg)) {
        args.emplace_back(values.at(*ref));
      } else if (const auto* refs = std::get_if<std::vector<int64_t>>(&arg)) {
        std::vector<ir::Value*> list;
        for (int64_t r : *refs)
          list.push_back(r == kNoneRef ? nullptr : values.at(r));
        args.emplace_back(std::move(list));
      } else if (const auto* sizes = std::get_if<Sizes>(&arg)) {
        std::vector<int64_t> numbers;
        for (const SizeExpression& size : sizes->items)
          numbers.push_back(size.evaluate(size_of));
        args.emplace_back(sizes->is_list ? c10::IValue(numbers) : c10::IValue(numbers.at(0)));
      } else {
        args.emplace_back(std::get<c10::IValue>(arg));
      }
    }
    const c10::OperatorHandle& op = call.op;
    auto outputs = ops.add_op(
        op.schema(), [&op](torch::jit::Stack& stack) { op.callBoxed(stack); }, args);
    for (size_t i = 0; i < outputs.size(); ++i)
      values[call.outputs.at(i)] = outputs[i];
  }
  for (int64_t ref : outputs_)
    ops.add_output(values.at(ref));
  return ops.finish();
}

std::vector<std::string> FxProgram::op_names() const {
  std::vector<std::string> names;
  for (const Call& call : calls_)
    names.push_back(qualified_op_name(call.op.schema()));
  return names;
}

}  // namespace kiln
