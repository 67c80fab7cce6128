#include "backend/capture/import_graph.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "backend/capture/partition.h"
#include "backend/capture/size_nodes.h"
#include "kiln/error.h"
#include "runtime/bridge/tensor_bridge.h"

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
      } else if (sizes_.is_size_node(node)) {
        compute_sizes(node);
      } else if (node->kind() == c10::prim::ConstantChunk) {
        import_constant_chunk(node);
      } else if (node->kind() == c10::prim::ListUnpack) {
        unpack(node, pieces_.at(node->input()));
      } else if (is_split_op(node)) {
        pieces_[node->output()] =
            ops_.add_pieces(node->schema(), operation_of(node), arguments_of(node, node->schema()));
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

  // Size arithmetic (size_nodes.h), run for the sizes of this import: aten::size on the meta
  // tensor of its value, the rest on the numbers (and 0-dim tensors) computed before it.
  void compute_sizes(const Node* node) {
    torch::jit::Stack stack;
    for (const Value* in : node->inputs()) {
      if (auto found = constants_.find(in); found != constants_.end()) {
        stack.push_back(found->second);
      } else if (in->node()->kind() == c10::prim::Constant) {
        stack.push_back(*torch::jit::toIValue(in));  // a number, or a 0-dim tensor
      } else {
        stack.emplace_back(ops_.meta(values_.at(in)));  // a tensor whose sizes are read
      }
    }
    try {
      run_size_node(node, stack);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::Unsupported, std::string("computing a size (") +
                                              node->kind().toQualString() +
                                              ") failed: " + e.what());
    }
    const size_t first = stack.size() - node->outputs().size();
    for (size_t i = 0; i < node->outputs().size(); ++i)
      constants_[node->output(i)] = stack[first + i];
  }

  // The list and number nodes have no schema to find their operation by.
  static void run_size_node(const Node* node, torch::jit::Stack& stack) {
    const auto kind = node->kind();
    if (kind == c10::prim::ListUnpack) {
      const c10::List<c10::IValue> list = stack.back().toList();
      if (list.size() != node->outputs().size())
        throw Error(ErrorKind::Unsupported, "a list of sizes unpacks into another number");
      stack.pop_back();
      for (const c10::IValue& element : list)
        stack.push_back(element);
    } else if (kind == c10::prim::ListConstruct) {
      c10::List<int64_t> list;
      for (const c10::IValue& element : stack)
        list.push_back(element.toInt());
      stack = {c10::IValue(list)};
    } else if (kind == c10::prim::NumToTensor) {
      stack.back() = at::scalar_to_tensor(stack.back().toScalar());  // an int gives a long
    } else {
      node->getOperation()(stack);
    }
  }

  // A size in a 0-dim tensor that an op takes as a tensor: a constant of the graph.
  ir::Value* size_tensor(const Value* in) {
    if (auto found = values_.find(in); found != values_.end()) return found->second;
    return values_[in] = ops_.add_constant(constants_.at(in).toTensor());
  }

  ImportArg argument(const Value* in, const c10::Argument& formal) {
    if (is_tensor_list_type(formal.type()) || is_optional_tensor_list_type(formal.type())) {
      // The partitioner let in only tensors and None constants; None is nullptr.
      std::vector<ir::Value*> elements;
      for (const Value* element : in->node()->inputs()) {
        if (constants_.count(element) && constants_.at(element).isTensor()) {
          elements.push_back(size_tensor(element));
          continue;
        }
        auto found = values_.find(element);
        elements.push_back(found == values_.end() ? nullptr : found->second);
      }
      return elements;
    }
    if (auto found = values_.find(in); found != values_.end()) return found->second;
    if (auto found = constants_.find(in); found != constants_.end()) {
      if (found->second.isTensor()) return size_tensor(in);
      return found->second;
    }
    return *torch::jit::toIValue(in);
  }

  std::vector<ImportArg> arguments_of(const Node* node, const c10::FunctionSchema& schema) {
    std::vector<ImportArg> args;
    for (size_t i = 0; i < schema.arguments().size(); ++i)
      args.push_back(argument(node->input(i), schema.arguments()[i]));
    return args;
  }

  static RunOp operation_of(const Node* node) {
    return
        [operation = node->getOperation()](torch::jit::Stack& stack) mutable { operation(stack); };
  }

  void import_op(const Node* node) {
    if (import_as_scalar_op(node)) return;
    const c10::FunctionSchema& schema = node->schema();
    // An expanded fused op leaves out what eager returns as None (attention weights not asked
    // for); where the graph reads that, the op is imported whole.
    const bool expand = std::all_of(node->outputs().begin() + 1, node->outputs().end(),
                                    [](const Value* out) { return !out->hasUses(); });
    auto outputs = ops_.add_op(schema, operation_of(node), arguments_of(node, schema), expand);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      values_[node->output(i)] = outputs.at(i);
  }

  // A traced Python number is a 0-dim tensor constant: `x * 0.5` is aten::mul.Tensor(x, %c), %c
  // a wrapped number. That is the Scalar overload's computation exactly (ATen wraps a Scalar in
  // such a tensor itself), so it is imported as that: the number becomes an attribute the passes
  // can read (recognize_gelu's constants, canonicalize's division by a power of two) and a
  // kernel's immediate instead of a buffer; and it keeps the wrapped number's dtype rule, which
  // a constant buffer loses (an integer tensor times 0.5 is float32, not float64).
  bool import_as_scalar_op(const Node* node) {
    const c10::FunctionSchema& schema = node->schema();
    // rsub: a traced `1 - x` (an attention mask's `1.0 - mask`), the number again second.
    static const std::unordered_set<std::string> binary = {"aten::mul", "aten::div", "aten::add",
                                                           "aten::sub", "aten::rsub"};
    if (schema.overload_name() != "Tensor" || !binary.contains(schema.name()) ||
        node->input(1)->node()->kind() != c10::prim::Constant) {
      return false;
    }
    const c10::IValue number = *torch::jit::toIValue(node->input(1));
    if (!number.isTensor() || number.toTensor().dim() != 0 || !number.toTensor().is_cpu()) {
      return false;
    }
    const at::Tensor& scalar = number.toTensor();
    auto self = values_.find(node->input(0));
    if (self == values_.end() ||
        !(scalar.is_floating_point() || c10::isIntegralType(scalar.scalar_type(), false))) {
      return false;
    }
    // A wrapped number (what tracing records for a Python number) is exactly the Scalar
    // overload's operand; a plain 0-dim tensor is where x is floating (x's dtype wins).
    const bool wrapped = scalar.unsafeGetTensorImpl()->is_wrapped_number();
    if (!wrapped && !ir::is_floating(self->second->type().dtype)) return false;
    const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow(schema.name().c_str(), "Scalar");
    std::vector<ImportArg> args = {self->second, c10::IValue(scalar.item())};
    for (size_t i = 2; i < schema.arguments().size(); ++i)  // add's, sub's and rsub's alpha
      args.push_back(argument(node->input(i), schema.arguments()[i]));
    auto outputs = ops_.add_op(
        op.schema(), [op](torch::jit::Stack& stack) { op.callBoxed(stack); }, args);
    values_[node->output()] = outputs.at(0);
    return true;
  }

  // `prim::ConstantChunk` (a traced `chunk`): aten::chunk with its attributes as arguments.
  void import_constant_chunk(const Node* node) {
    static const auto chunk = c10::Dispatcher::singleton().findSchemaOrThrow("aten::chunk", "");
    const std::vector<ImportArg> args = {values_.at(node->input()),
                                         c10::IValue(node->i(c10::attr::chunks)),
                                         c10::IValue(node->i(c10::attr::dim))};
    unpack(node, ops_.add_pieces(
                     chunk.schema(), [](torch::jit::Stack& s) { chunk.callBoxed(s); }, args));
  }

  // The node's outputs are the pieces, one each. ATen may cut fewer pieces than the graph names
  // (chunk of a short dim); the region then runs in the interpreter, which raises eager's error.
  void unpack(const Node* node, const std::vector<ir::Value*>& pieces) {
    if (pieces.size() != node->outputs().size()) {
      throw Error(ErrorKind::Unsupported, std::string(node->kind().toQualString()) + " takes " +
                                              std::to_string(node->outputs().size()) +
                                              " pieces, and the input was cut into " +
                                              std::to_string(pieces.size()));
    }
    for (size_t i = 0; i < pieces.size(); ++i)
      values_[node->output(i)] = pieces[i];
  }

  const torch::jit::Graph& region_;
  OpImporter ops_;
  std::unordered_map<const Value*, ir::Value*> values_;
  std::unordered_map<const Value*, c10::IValue> constants_;  // numbers, sizes among them
  SizeNodes sizes_;
  std::unordered_map<const Value*, std::vector<ir::Value*>> pieces_;  // a split's list output
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
