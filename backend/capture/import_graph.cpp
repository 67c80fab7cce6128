#include "backend/capture/import_graph.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_map>

#include "kiln/error.h"
#include "runtime/tensor_bridge.h"

namespace kiln {
namespace {

using torch::jit::Node;
using torch::jit::Value;

class Importer {
 public:
  Importer(const torch::jit::Graph& region, const std::vector<at::Tensor>& inputs)
      : region_(region), ops_(inputs, input_names(region)) {}

  ImportedGraph run() {
    for (size_t i = 0; i < region_.inputs().size(); ++i)
      values_[region_.inputs()[i]] = ops_.input(i);
    for (const Node* node : region_.nodes()) {
      if (node->kind() == c10::prim::Constant) {
        import_constant(node);
      } else if (node->kind() != c10::prim::ListConstruct) {
        import_op(node);
      }
    }
    for (const Value* out : region_.outputs())
      ops_.add_output(values_.at(out));
    return ops_.finish();
  }

 private:
  static std::vector<std::string> input_names(const torch::jit::Graph& region) {
    std::vector<std::string> names;
    for (const Value* v : region.inputs())
      names.push_back(v->debugNameBase());
    return names;
  }

  void import_constant(const Node* node) {
    c10::IValue value = *torch::jit::toIValue(node->output());
    if (value.isTensor()) {
      values_[node->output()] = ops_.add_constant(value.toTensor());
    } else {
      constants_[node->output()] = value;
    }
  }

  ImportArg argument(const Value* in, const c10::Argument& formal) const {
    if (is_tensor_list_type(formal.type()) || is_optional_tensor_list_type(formal.type())) {
      // The partitioner let in only tensors and None constants; None is nullptr.
      std::vector<ir::Value*> elements;
      for (const Value* element : in->node()->inputs()) {
        auto found = values_.find(element);
        elements.push_back(found == values_.end() ? nullptr : found->second);
      }
      return elements;
    }
    if (auto found = values_.find(in); found != values_.end()) return found->second;
    if (auto found = constants_.find(in); found != constants_.end()) return found->second;
    return *torch::jit::toIValue(in);
  }

  void import_op(const Node* node) {
    const c10::FunctionSchema& schema = node->schema();
    std::vector<ImportArg> args;
    for (size_t i = 0; i < schema.arguments().size(); ++i)
      args.push_back(argument(node->input(i), schema.arguments()[i]));
    torch::jit::Operation operation = node->getOperation();
    auto outputs = ops_.add_op(
        schema, [&](torch::jit::Stack& stack) { operation(stack); }, args);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      values_[node->output(i)] = outputs.at(i);
  }

  const torch::jit::Graph& region_;
  OpImporter ops_;
  std::unordered_map<const Value*, ir::Value*> values_;
  std::unordered_map<const Value*, c10::IValue> constants_;
};

}  // namespace

ImportedGraph import_region(const torch::jit::Graph& region,
                            const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != region.inputs().size()) {
    throw Error(ErrorKind::Internal, "region called with " + std::to_string(inputs.size()) +
                                         " inputs, expects " +
                                         std::to_string(region.inputs().size()));
  }
  return Importer(region, inputs).run();
}

}  // namespace kiln
