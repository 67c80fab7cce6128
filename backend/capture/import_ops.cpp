#include "backend/capture/import_ops.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>

#include "backend/capture/conv_layout.h"
#include "backend/capture/expand_transformer_ops.h"
#include "backend/capture/meta_memo.h"
#include "kiln/error.h"
#include "passes/base/environment.h"
#include "passes/ir/op_table.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

// Runs `op_name` on the meta tensors in `stack` through an op with the same output shapes that
// has a meta kernel, where `op_name` has none; false where there is no such substitute.
// aten::_convolution, which tracing records, adds only backend flags (benchmark, deterministic,
// cudnn, tf32) to aten::convolution: without this, each of a traced CNN's convolutions would
// run for real on zeros at import (ResNet-50's: about 0.1 s).
bool run_meta_substitute(const std::string& op_name, torch::jit::Stack& stack) {
  if (op_name != "aten::_convolution" || stack.size() < 9) return false;
  static const c10::OperatorHandle convolution =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  stack.resize(9);
  convolution.callBoxed(stack);
  return true;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// An op's own error: c10's without its backtrace; an error raised by a meta kernel written in
// Python reaches here as another std::exception.
std::string reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return first_line(c10_error ? c10_error->what_without_backtrace() : e.what());
}

// An output an op returns as None (convolution_backward's grad_bias where its output_mask says
// not to compute it; attention weights not asked for, expand_transformer_ops.h) is nullptr here;
// an op that reads it, or a graph that returns it, runs in the fallback with eager's semantics.
Error not_computed(const std::string& who) {
  return Error(ErrorKind::Unsupported, who + " an output its op returns as None (not computed)");
}

// " (on f32[2,3], f32[3,2]{1,3})": the tensors an op was given, for its errors.
std::string described(const torch::jit::Stack& stack) {
  std::string text;
  for (const c10::IValue& value : stack) {
    if (!value.isTensor() || !value.toTensor().defined()) continue;
    auto type = tensor_type_of(value.toTensor());
    if (type) type->device = {};  // the meta device says nothing
    text += (text.empty() ? " (on " : ", ") + (type ? ir::type_string(*type) : "a tensor");
  }
  return text.empty() ? text : text + ")";
}

bool is_none(const c10::IValue& out) {
  return out.isNone() || (out.isTensor() && !out.toTensor().defined());
}

}  // namespace

OpImporter::OpImporter(const std::vector<at::Tensor>& inputs,
                       const std::vector<std::string>& names) {
  result_.graph = std::make_unique<ir::Graph>();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (i == 0) {
      result_.device = t.device();
    } else if (t.device() != result_.device) {
      throw Error(ErrorKind::Unsupported, "region inputs are on several devices (" +
                                              result_.device.str() + " and " + t.device().str() +
                                              ")");
    }
    ir::Value* value =
        result_.graph->add_input(type_of(t, "input " + std::to_string(i)),
                                 i < names.size() ? names[i] : "in" + std::to_string(i));
    inputs_.push_back(value);
    meta_[value] = meta_like(t);
  }
}

ir::TensorType OpImporter::type_of(const at::Tensor& t, const std::string& what) const {
  auto type = tensor_type_of(t);
  if (!type) {
    throw Error(ErrorKind::Unsupported, what + " has dtype " +
                                            std::string(c10::toString(t.scalar_type())) +
                                            " or a layout the graph IR cannot hold");
  }
  if (t.device().is_meta()) type->device = *to_ir_device(result_.device);
  return *type;
}

ir::Value* OpImporter::add_constant(const at::Tensor& tensor) {
  at::Tensor t = tensor.detach();
  auto* node = result_.graph->append(ir::kConstantOp, {}, {type_of(t, "a constant")},
                                     {{"index", static_cast<int64_t>(result_.constants.size())}});
  result_.constants.push_back(t);
  meta_[node->output()] = meta_like(t);
  return node->output();
}

c10::IValue OpImporter::meta_of(const ImportArg& arg, const c10::Argument& formal) const {
  if (const auto* value = std::get_if<ir::Value*>(&arg)) return meta_.at(*value);
  if (const auto* values = std::get_if<std::vector<ir::Value*>>(&arg)) {
    if (is_optional_tensor_list_type(formal.type())) {
      c10::List<std::optional<at::Tensor>> metas;
      for (const ir::Value* v : *values)
        metas.push_back(v ? std::optional<at::Tensor>(meta_.at(v)) : std::nullopt);
      return metas;
    }
    c10::List<at::Tensor> metas;
    for (const ir::Value* v : *values) {
      if (!v) throw Error(ErrorKind::Internal, "a None in '" + formal.name() + "', a Tensor[]");
      metas.push_back(meta_.at(v));
    }
    return metas;
  }
  return std::get<c10::IValue>(arg);
}

// A zero-filled tensor with the sizes and strides of a meta tensor, on the graph's device.
c10::IValue OpImporter::materialize(const c10::IValue& value) const {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(result_.device)).zero_();
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : value.toTensorList())
      list.push_back(materialize(t).toTensor());
    return list;
  }
  if (value.isOptionalTensorList()) {
    c10::List<std::optional<at::Tensor>> list;
    for (const c10::IValue& element : value.toListRef()) {
      list.push_back(element.isNone() ? std::nullopt
                                      : std::optional(materialize(element).toTensor()));
    }
    return list;
  }
  return value;
}

std::vector<ir::Value*> OpImporter::add_op(const c10::FunctionSchema& schema, const RunOp& run,
                                           const std::vector<ImportArg>& args, bool expand) {
  if (expand) {
    if (auto parts = expand_transformer_op(*this, schema.name(), args)) return *parts;
  }
  const std::string op_name = qualified_op_name(schema);
  const auto& formals = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    // nullptr is None only as an element of a `Tensor?[]`.
    const auto* value = std::get_if<ir::Value*>(&args[i]);
    const auto* list = std::get_if<std::vector<ir::Value*>>(&args[i]);
    if ((value && !*value) || (list && !is_optional_tensor_list_type(formals.at(i).type()) &&
                               std::find(list->begin(), list->end(), nullptr) != list->end())) {
      throw not_computed(op_name + " reads");
    }
  }
  torch::jit::Stack stack;
  for (size_t i = 0; i < args.size(); ++i)
    stack.push_back(meta_of(args[i], formals.at(i)));
  const std::string given = described(stack);
  const torch::jit::Stack meta_inputs = stack;
  bool sampled = false;
  try {
    run_on_meta_remembered(
        schema,
        [&](torch::jit::Stack& inputs) {
          if (!run_meta_substitute(op_name, inputs)) run(inputs);
        },
        stack);
    match_conv_layout(op_name, meta_inputs, stack, result_.device);
    match_group_norm_layout(op_name, meta_inputs, stack, result_.device);
  } catch (const std::exception& e) {
    // Some ATen ops (relu, fused transformer ops) have no meta kernel: run them once on zeros.
    // An op in the op table never has a data-dependent shape; for any other op the runtime
    // checks each call that its outputs still have these shapes, and falls back if not.
    if (result_.device.is_meta()) {
      throw Error(ErrorKind::Unsupported, "cannot infer the output shapes of " + op_name + given +
                                              " on meta tensors: " + reason(e));
    }
    sampled = !ir::find_op(op_name);
    log(LogLevel::Debug,
        "import: " + op_name + " runs on zeros for its output shapes (" + reason(e) + ")");
    stack.clear();
    for (size_t i = 0; i < args.size(); ++i)
      stack.push_back(materialize(meta_of(args[i], formals.at(i))));
    try {
      run(stack);
    } catch (const std::exception& again) {
      throw Error(ErrorKind::Unsupported,
                  "cannot infer the output shapes of " + op_name + given + ": " + reason(again));
    }
    for (auto& out : stack) {
      if (out.isTensor() && out.toTensor().defined()) out = meta_like(out.toTensor());
    }
  }
  std::vector<ir::TensorType> output_types;
  for (const c10::IValue& out : stack) {
    if (is_none(out)) {
      // The IR node keeps the op's outputs in schema order; this one has no user, and the
      // executor stores the op's None as an undefined tensor.
      output_types.push_back(
          ir::make_contiguous(ir::DType::Float32, {0}, *to_ir_device(result_.device)));
      continue;
    }
    if (!out.isTensor()) {
      throw Error(ErrorKind::Unsupported,
                  op_name + " returns a " + out.tagKind() + ", and graph IR ops return tensors");
    }
    output_types.push_back(type_of(out.toTensor(), op_name + "'s output"));
  }

  std::vector<ir::Value*> inputs;
  ir::AttrList attrs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const auto* value = std::get_if<ir::Value*>(&args[i])) {
      inputs.push_back(*value);
    } else if (const auto* values = std::get_if<std::vector<ir::Value*>>(&args[i])) {
      if (is_optional_tensor_list_type(formals.at(i).type())) {
        // Which elements are tensors (graph inputs of the node, in order) and which are None.
        std::vector<bool> present;
        for (ir::Value* v : *values) {
          present.push_back(v != nullptr);
          if (v) inputs.push_back(v);
        }
        attrs.emplace_back(formals.at(i).name(), std::move(present));
        continue;
      }
      inputs.insert(inputs.end(), values->begin(), values->end());
      attrs.emplace_back(formals.at(i).name(), static_cast<int64_t>(values->size()));
    } else {
      auto attr = attr_from_ivalue(std::get<c10::IValue>(args[i]));
      if (!attr) {
        throw Error(ErrorKind::Unsupported, op_name + "'s argument '" + formals.at(i).name() +
                                                "' has a value the graph IR cannot hold");
      }
      attrs.emplace_back(formals.at(i).name(), std::move(*attr));
    }
  }
  // Read by the plan builder: this op's output shapes come from a sample run.
  if (sampled) attrs.emplace_back(ir::kSampledShapeAttr, true);
  ir::Node* node =
      result_.graph->append(op_name, std::move(inputs), std::move(output_types), std::move(attrs));
  std::vector<ir::Value*> outputs;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (is_none(stack[i])) {
      outputs.push_back(nullptr);
      continue;
    }
    // A factory (arange, full, scalar_tensor) runs on the device its arguments name, not on
    // meta; the ops after it see a meta tensor, as for every other value.
    const at::Tensor& out = stack[i].toTensor();
    meta_[node->output(i)] = out.device().is_meta() ? out : meta_like(out);
    outputs.push_back(node->output(i));
  }
  return outputs;
}

std::vector<ir::Value*> OpImporter::add_pieces(const c10::FunctionSchema& schema, const RunOp& run,
                                               const std::vector<ImportArg>& args) {
  const std::string op_name = qualified_op_name(schema);
  const auto dim_index = schema.argumentIndexWithName("dim");
  const auto* self = std::get_if<ir::Value*>(&args.at(0));
  const auto* dim_value = dim_index ? std::get_if<c10::IValue>(&args.at(*dim_index)) : nullptr;
  if (!self || !dim_value || !dim_value->isInt()) {
    throw Error(ErrorKind::Internal, op_name + " is not a tensor cut along a constant dim");
  }
  torch::jit::Stack stack;
  for (size_t i = 0; i < args.size(); ++i)
    stack.push_back(meta_of(args[i], schema.arguments().at(i)));
  try {
    run(stack);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Unsupported, "cannot infer the pieces of " + op_name + ": " + reason(e));
  }
  const at::Tensor& whole = meta_.at(*self);
  const int64_t dim = c10::maybe_wrap_dim(dim_value->toInt(), whole.dim());
  const bool select = schema.name() == "aten::unbind";
  auto& dispatcher = c10::Dispatcher::singleton();
  const auto piece_op = select ? dispatcher.findSchemaOrThrow("aten::select", "int")
                               : dispatcher.findSchemaOrThrow("aten::slice", "Tensor");
  const RunOp run_piece = [piece_op](torch::jit::Stack& s) { piece_op.callBoxed(s); };
  std::vector<ir::Value*> pieces;
  int64_t start = 0;
  for (const at::Tensor& piece : stack.at(0).toTensorList()) {
    const int64_t length = select ? 1 : piece.size(dim);
    std::vector<ImportArg> piece_args = {*self, c10::IValue(dim), c10::IValue(start)};
    if (!select) {
      piece_args.emplace_back(c10::IValue(start + length));
      piece_args.emplace_back(c10::IValue(int64_t{1}));
    }
    pieces.push_back(add_op(piece_op.schema(), run_piece, piece_args).at(0));
    start += length;
  }
  return pieces;
}

void OpImporter::add_output(ir::Value* value) {
  if (!value) throw not_computed("the graph returns");
  result_.graph->add_output(value);
}

ImportedGraph OpImporter::finish() {
  return std::move(result_);
}

}  // namespace kiln
