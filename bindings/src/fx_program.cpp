#include "bindings/src/fx_program.h"

#include <torch/csrc/jit/python/pybind_utils.h>

#include <unordered_map>

#include "backend/capture/partition.h"
#include "kiln/error.h"
#include "runtime/tensor_bridge.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

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

// int, SymInt or Scalar, or an optional one; with `list`, a list of int or SymInt.
bool takes_size(c10::TypePtr type, bool list) {
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  if (list) {
    auto list_type = type->cast<c10::ListType>();
    if (!list_type) return false;
    type = list_type->getElementType();
  } else if (type->kind() == c10::NumberType::Kind) {
    return true;
  }
  return type->kind() == c10::IntType::Kind || type->kind() == c10::SymIntType::Kind;
}

}  // namespace

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

SizeExpression FxProgram::size_expression(const py::handle& program,
                                          const std::string& what) const {
  if (program.is_none()) {
    throw Error(ErrorKind::Unsupported,
                what + " is a symbolic size that is not an expression of the region's sizes");
  }
  std::vector<SizeExpression::Token> tokens;
  for (auto item : program.cast<py::list>()) {
    auto token = item.cast<py::tuple>();
    SizeExpression::Token t{SizeExpression::op_named(token[0].cast<std::string>()),
                            token[1].cast<int64_t>(), token[2].cast<int64_t>()};
    if (t.op == SizeExpression::Op::kDim) checked_ref(t.a);
    tokens.push_back(t);
  }
  return SizeExpression(std::move(tokens));
}

int64_t FxProgram::checked_ref(int64_t ref) const {
  if (ref < 0 || ref >= next_ref_) {
    throw Error(ErrorKind::Internal, "FX reference " + std::to_string(ref) + " is not defined");
  }
  return ref;
}

std::vector<int64_t> FxProgram::call(const std::string& op, const py::list& args) {
  Call call{find_operator(op), {}, {}};
  const c10::FunctionSchema& schema = call.op.schema();
  if (auto problem = schema_problem(schema)) {
    throw Error(ErrorKind::Unsupported, op + " " + *problem);
  }
  const auto& formals = schema.arguments();
  if (args.size() != formals.size()) {
    throw Error(ErrorKind::Internal, op + " called with " + std::to_string(args.size()) +
                                         " arguments, its schema has " +
                                         std::to_string(formals.size()));
  }
  for (size_t i = 0; i < formals.size(); ++i) {
    const c10::Argument& formal = formals[i];
    auto entry = args[i].cast<py::tuple>();
    const auto kind = entry[0].cast<std::string>();
    const std::string what = op + "'s argument '" + formal.name() + "'";
    if (kind == "ref" &&
        (is_tensor_type(formal.type()) || is_optional_tensor_type(formal.type()))) {
      call.args.emplace_back(checked_ref(entry[1].cast<int64_t>()));
    } else if (kind == "refs" && (is_tensor_list_type(formal.type()) ||
                                  is_optional_tensor_list_type(formal.type()))) {
      // A None element of a `Tensor?[]` is kNoneRef.
      const bool optional = is_optional_tensor_list_type(formal.type());
      std::vector<int64_t> refs;
      for (auto ref : entry[1].cast<py::list>()) {
        if (ref.is_none() && !optional) throw Error(ErrorKind::Unsupported, what + " has a None");
        refs.push_back(ref.is_none() ? kNoneRef : checked_ref(ref.cast<int64_t>()));
      }
      call.args.emplace_back(std::move(refs));
    } else if (kind == "size" && takes_size(formal.type(), /*list=*/false)) {
      call.args.emplace_back(Sizes{{size_expression(entry[1], what)}, /*is_list=*/false});
    } else if (kind == "sizes" && takes_size(formal.type(), /*list=*/true)) {
      Sizes sizes{{}, /*is_list=*/true};
      for (auto program : entry[1].cast<py::list>())
        sizes.items.push_back(size_expression(program, what));
      call.args.emplace_back(std::move(sizes));
    } else if (kind == "default" && formal.default_value()) {
      call.args.emplace_back(*formal.default_value());
    } else if (kind == "const") {
      c10::IValue value;
      try {
        value = torch::jit::toIValue(entry[1], formal.type());
      } catch (const std::exception& e) {
        throw Error(ErrorKind::Unsupported, what + ": " + e.what());
      }
      if (!attr_from_ivalue(value)) {
        throw Error(ErrorKind::Unsupported, what + " is a constant of type " +
                                                formal.type()->str() +
                                                " that the graph IR cannot hold");
      }
      call.args.emplace_back(std::move(value));
    } else {
      throw Error(ErrorKind::Unsupported,
                  what + " of type " + formal.type()->str() + " cannot be given as '" + kind + "'");
    }
  }
  for (size_t i = 0; i < schema.returns().size(); ++i)
    call.outputs.push_back(next_ref_++);
  calls_.push_back(std::move(call));
  return calls_.back().outputs;
}

ImportedGraph FxProgram::import(const Tensors& inputs, const std::vector<size_t>& frozen) const {
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

std::shared_ptr<RegionRunner> make_fx_region(std::shared_ptr<const FxProgram> program,
                                             const CompileOptions& options, const std::string& name,
                                             py::object fallback, std::vector<size_t> weights) {
  // The Python callable may outlive any Python frame: release it with the GIL held.
  std::shared_ptr<py::object> eager(new py::object(std::move(fallback)), [](py::object* f) {
    py::gil_scoped_acquire gil;
    delete f;
  });
  RegionSource source;
  source.import = [program](const Tensors& inputs, const std::vector<size_t>& frozen) {
    return program->import(inputs, frozen);
  };
  for (size_t i : weights) {
    if (static_cast<int64_t>(i) >= program->num_inputs()) {
      throw Error(ErrorKind::InvalidInput, "weight input " + std::to_string(i) +
                                               " of a region with " +
                                               std::to_string(program->num_inputs()) + " inputs");
    }
  }
  source.weight_inputs = std::move(weights);
  source.fallback = [eager](const Tensors& inputs) {
    py::gil_scoped_acquire gil;
    py::tuple args(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      args[i] = py::cast(inputs[i]);
    py::object result = (*eager)(*args);
    Tensors outputs;
    if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
      for (auto item : result)
        outputs.push_back(item.cast<at::Tensor>());
    } else {
      outputs.push_back(result.cast<at::Tensor>());
    }
    return outputs;
  };
  source.fallback_name = "eager";
  source.op_names = program->op_names();
  return std::make_shared<RegionRunner>(std::move(source), options, name);
}

}  // namespace kiln::python
