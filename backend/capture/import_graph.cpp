#include "backend/capture/import_graph.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>

#include "kiln/error.h"
#include "passes/ir/op_table.h"
#include "runtime/plan.h"
#include "runtime/tensor_bridge.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

at::Tensor meta_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class Importer {
 public:
  Importer(const std::vector<at::Tensor>& inputs) : inputs_(inputs) {
    result_.graph = std::make_unique<ir::Graph>();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i == 0) {
        result_.device = inputs[i].device();
      } else if (inputs[i].device() != result_.device) {
        throw Error(ErrorKind::Unsupported, "region inputs are on several devices (" +
                                                result_.device.str() + " and " +
                                                inputs[i].device().str() + ")");
      }
    }
  }

  ImportedGraph run(const torch::jit::Graph& region) {
    for (size_t i = 0; i < region.inputs().size(); ++i) {
      const at::Tensor& t = inputs_.at(i);
      const Value* v = region.inputs()[i];
      values_[v] =
          result_.graph->add_input(type_of(t, "input " + std::to_string(i)), v->debugNameBase());
      meta_[v] = meta_like(t);
    }
    for (const Node* node : region.nodes()) {
      if (node->kind() == c10::prim::Constant) {
        import_constant(node);
      } else if (node->kind() == c10::prim::ListConstruct) {
        c10::List<at::Tensor> metas;
        for (const Value* in : node->inputs())
          metas.push_back(meta_.at(in).toTensor());
        meta_[node->output()] = metas;
      } else {
        import_op(node);
      }
    }
    for (const Value* out : region.outputs())
      result_.graph->add_output(values_.at(out));
    return std::move(result_);
  }

 private:
  ir::TensorType type_of(const at::Tensor& t, const std::string& what) {
    auto type = tensor_type_of(t);
    if (!type) {
      throw Error(ErrorKind::Unsupported, what + " has dtype " +
                                              std::string(c10::toString(t.scalar_type())) +
                                              " or layout the graph IR cannot hold");
    }
    if (t.device().is_meta()) type->device = *to_ir_device(result_.device);
    return *type;
  }

  // A zero-filled tensor with the sizes and strides of a meta tensor, on the region's device.
  c10::IValue materialize(const c10::IValue& value) const {
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
    return value;
  }

  void import_constant(const Node* node) {
    c10::IValue value = *torch::jit::toIValue(node->output());
    if (value.isTensor()) {
      at::Tensor t = value.toTensor().detach();
      auto* out =
          result_.graph->append("prim::Constant", {}, {type_of(t, "a constant")},
                                {{"index", static_cast<int64_t>(result_.constants.size())}});
      result_.constants.push_back(t);
      values_[node->output()] = out->output();
      meta_[node->output()] = meta_like(t);
    } else {
      meta_[node->output()] = value;
    }
  }

  void import_op(const Node* node) {
    const c10::FunctionSchema& schema = node->schema();
    torch::jit::Stack stack;
    for (const Value* in : node->inputs())
      stack.push_back(meta_.at(in));
    bool sampled = false;
    try {
      node->getOperation()(stack);
    } catch (const c10::Error& e) {
      // Some ATen ops (relu, fused transformer ops) have no meta kernel: run them once on zeros.
      // An op in the op table never has a data-dependent shape; for any other op the runtime
      // checks each call that its outputs still have these shapes, and falls back if not.
      if (result_.device.is_meta()) {
        throw Error(ErrorKind::Unsupported,
                    "cannot infer the output shapes of " + qualified_op_name(schema) +
                        " on meta tensors: " + first_line(e.what_without_backtrace()));
      }
      sampled = !ir::find_op(qualified_op_name(schema));
      stack.clear();
      for (const Value* in : node->inputs())
        stack.push_back(materialize(meta_.at(in)));
      try {
        node->getOperation()(stack);
      } catch (const c10::Error& again) {
        throw Error(ErrorKind::Unsupported, "cannot infer the output shapes of " +
                                                qualified_op_name(schema) + ": " +
                                                first_line(again.what_without_backtrace()));
      }
      for (auto& out : stack)
        out = meta_like(out.toTensor());
    }
    std::vector<ir::TensorType> output_types;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      output_types.push_back(
          type_of(stack.at(i).toTensor(), qualified_op_name(schema) + "'s output"));
    }

    std::vector<ir::Value*> inputs;
    ir::AttrList attrs;
    const auto& args = schema.arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const Value* in = node->input(i);
      const c10::TypePtr& type = args[i].type();
      auto list = type->cast<c10::ListType>();
      if (list && list->getElementType()->kind() == c10::TypeKind::TensorType) {
        const Node* builder = in->node();
        for (const Value* element : builder->inputs())
          inputs.push_back(values_.at(element));
        attrs.emplace_back(args[i].name(), static_cast<int64_t>(builder->inputs().size()));
      } else if (values_.count(in)) {
        inputs.push_back(values_.at(in));
      } else {
        attrs.emplace_back(args[i].name(), *attr_from_ivalue(*torch::jit::toIValue(in)));
      }
    }
    // Read by the plan builder: this op's output shapes come from a sample run.
    if (sampled) attrs.emplace_back(kSampledShapeAttr, true);
    ir::Node* imported = result_.graph->append(qualified_op_name(schema), std::move(inputs),
                                               std::move(output_types), std::move(attrs));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      values_[node->output(i)] = imported->output(i);
      meta_[node->output(i)] = stack.at(i);
    }
  }

  const std::vector<at::Tensor>& inputs_;
  ImportedGraph result_;
  std::unordered_map<const Value*, ir::Value*> values_;
  std::unordered_map<const Value*, c10::IValue> meta_;
};

}  // namespace

ImportedGraph import_region(const torch::jit::Graph& region,
                            const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != region.inputs().size()) {
    throw Error(ErrorKind::Internal, "region called with " + std::to_string(inputs.size()) +
                                         " inputs, expects " +
                                         std::to_string(region.inputs().size()));
  }
  return Importer(inputs).run(region);
}

}  // namespace kiln
