#include "bindings/src/fx_program.h"

#include <torch/csrc/jit/python/pybind_utils.h>

#include "kiln/error.h"
#include "runtime/bridge/tensor_bridge.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

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

std::vector<SizeExpression::Token> size_tokens(const py::handle& tokens) {
  std::vector<SizeExpression::Token> decoded;
  for (auto item : tokens.cast<py::list>()) {
    auto token = item.cast<py::tuple>();
    decoded.push_back({SizeExpression::op_named(token[0].cast<std::string>()),
                       token[1].cast<int64_t>(), token[2].cast<int64_t>()});
  }
  return decoded;
}

SizeExpression size_expression(const FxProgram& program, const py::handle& tokens,
                               const std::string& what) {
  if (tokens.is_none()) {
    throw Error(ErrorKind::Unsupported,
                what + " is a symbolic size that is not an expression of the region's sizes");
  }
  std::vector<SizeExpression::Token> decoded = size_tokens(tokens);
  for (const SizeExpression::Token& t : decoded)
    if (t.op == SizeExpression::Op::kDim) program.checked_ref(t.a);
  return SizeExpression(std::move(decoded));
}

FxProgram::Arg decode(const FxProgram& program, const c10::Argument& formal, const py::tuple& entry,
                      const std::string& what) {
  const auto kind = entry[0].cast<std::string>();
  const c10::TypePtr& type = formal.type();
  if (kind == "ref" && (is_tensor_type(type) || is_optional_tensor_type(type)))
    return program.checked_ref(entry[1].cast<int64_t>());
  if (kind == "refs" && (is_tensor_list_type(type) || is_optional_tensor_list_type(type))) {
    // A None element of a `Tensor?[]` is kNoneRef.
    const bool optional = is_optional_tensor_list_type(type);
    std::vector<int64_t> refs;
    for (auto ref : entry[1].cast<py::list>()) {
      if (ref.is_none() && !optional) throw Error(ErrorKind::Unsupported, what + " has a None");
      refs.push_back(ref.is_none() ? FxProgram::kNoneRef
                                   : program.checked_ref(ref.cast<int64_t>()));
    }
    return refs;
  }
  if (kind == "size" && takes_size(type, /*list=*/false))
    return FxProgram::Sizes{{size_expression(program, entry[1], what)}, /*is_list=*/false};
  if (kind == "sizes" && takes_size(type, /*list=*/true)) {
    FxProgram::Sizes sizes{{}, /*is_list=*/true};
    for (auto tokens : entry[1].cast<py::list>())
      sizes.items.push_back(size_expression(program, tokens, what));
    return sizes;
  }
  if (kind == "default" && formal.default_value()) return *formal.default_value();
  if (kind == "const") {
    try {
      return torch::jit::toIValue(entry[1], type);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::Unsupported, what + ": " + e.what());
    }
  }
  throw Error(ErrorKind::Unsupported,
              what + " of type " + type->str() + " cannot be given as '" + kind + "'");
}

}  // namespace

std::vector<int64_t> add_call(FxProgram& program, const std::string& op, const py::list& args) {
  const c10::OperatorHandle handle = find_operator(op);
  const c10::FunctionSchema& schema = handle.schema();
  if (auto problem = operator_problem(op)) throw Error(ErrorKind::Unsupported, op + " " + *problem);
  const auto& formals = schema.arguments();
  if (args.size() != formals.size()) {
    throw Error(ErrorKind::Internal, op + " called with " + std::to_string(args.size()) +
                                         " arguments, its schema has " +
                                         std::to_string(formals.size()));
  }
  std::vector<FxProgram::Arg> decoded;
  for (size_t i = 0; i < formals.size(); ++i) {
    const std::string what = op + "'s argument '" + formals[i].name() + "'";
    decoded.push_back(decode(program, formals[i], args[i].cast<py::tuple>(), what));
  }
  return program.call(handle, std::move(decoded));
}

DeclaredSizes declared_sizes(std::vector<std::vector<int>> symbols, const py::list& derived,
                             const py::list& strides) {
  DeclaredSizes declared{std::move(symbols), {}, {}};
  for (auto item : derived) {
    auto entry = item.cast<py::tuple>();
    declared.derived.push_back(
        {entry[0].cast<size_t>(), entry[1].cast<int>(), SizeExpression(size_tokens(entry[2]))});
  }
  for (auto item : strides) {
    auto entry = item.cast<py::tuple>();
    DeclaredSizes::Strides input{entry[0].cast<size_t>(), {}};
    for (auto program : entry[1].cast<py::list>())
      input.strides.emplace_back(size_tokens(program));
    declared.strides.push_back(std::move(input));
  }
  return declared;
}

std::shared_ptr<RegionRunner> make_fx_region(std::shared_ptr<const FxProgram> program,
                                             const CompileOptions& options, const std::string& name,
                                             py::object fallback, std::vector<size_t> weights,
                                             DeclaredSizes declared_sizes) {
  // The Python callable may outlive any Python frame: release it with the GIL held.
  std::shared_ptr<py::object> eager(new py::object(std::move(fallback)), [](py::object* f) {
    py::gil_scoped_acquire gil;
    delete f;
  });
  auto run_eagerly = [eager](const Tensors& inputs) {
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
  return std::make_shared<RegionRunner>(
      fx_region(std::move(program), run_eagerly, std::move(weights), std::move(declared_sizes)),
      options, name);
}

}  // namespace kiln::python
