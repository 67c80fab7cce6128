#include "passes/prepack_linear.h"

#include "passes/fold_constants.h"
#include "passes/kernel/lower_ops.h"
#include "passes/kernel/size_decisions.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ReadersMap = std::unordered_map<const ir::Value*, std::vector<Node*>>;

bool is_cpu_float32(const TensorType& type) {
  return type.dtype == ir::DType::Float32 && type.device.kind == ir::DeviceKind::CPU;
}

// The linears worth prepacking: frozen 2-D weight, float32 on the CPU, big enough, and not one
// that kiln computes in its own kernel.
bool worth_prepacking(const Node& node, int64_t min_macs) {
  if (node.op() != "aten::linear" || node.inputs().size() < 2) return false;
  const TensorType& x = node.input(0)->type();
  const TensorType& w = node.input(1)->type();
  if (!is_cpu_float32(x) || !is_cpu_float32(w) || !is_cpu_float32(node.output()->type())) {
    return false;
  }
  if (x.rank() < 2 || w.rank() != 2 || !from_constants(node.input(1))) return false;
  if (node.inputs().size() > 2) {
    const TensorType& b = node.input(2)->type();
    if (!is_cpu_float32(b) || b.rank() != 1) return false;
  }
  if (kernel::is_contraction(node)) return false;
  const int64_t k = w.sizes[1], n = w.sizes[0];
  if (k == 0 || x.sizes.back() != k) return false;
  const int64_t rows = x.numel() / k;
  return kernel::at_least(rows * n * k, min_macs, "a linear's multiply-adds, to prepack it");
}

// The products kiln::onednn_matmul takes (runtime/onednn_matmul.h): a linear whose weight is not
// frozen, or an aten::mm, float32 on the CPU, with a row-major input. oneDNN's matmul on a
// transposed input (a weight's gradient, x^T dy) measured 0.67x-1.24x ATen's: those stay ATen's.
bool takes_dense_matmul(const Node& node) {
  const bool linear = node.op() == "aten::linear" && node.inputs().size() >= 2;
  if (!linear && node.op() != "aten::mm") return false;
  const TensorType& x = node.input(0)->type();
  const TensorType& w = node.input(1)->type();
  if (!is_cpu_float32(x) || !is_cpu_float32(w) || !is_cpu_float32(node.output()->type())) {
    return false;
  }
  if (x.rank() < 2 || w.rank() != 2 || !x.is_contiguous()) return false;
  if (linear) {
    if (from_constants(node.input(1)) || kernel::is_contraction(node)) return false;
    if (node.inputs().size() > 2) {
      const TensorType& b = node.input(2)->type();
      if (!is_cpu_float32(b) || b.rank() != 1 || b.strides[0] != 1) return false;
    }
  }
  return true;
}

/// An activation oneDNN's matmul applies as a post-op (runtime/onednn_linear.h): the node and
/// the op's name for it.
struct Activation {
  Node* node = nullptr;
  std::string name = "none";
};

/// The activation that alone reads `y` (not a graph output), in y's type: relu, gelu (erf or
/// tanh), silu or sigmoid; none otherwise.
Activation activation_after(const ir::Value* y, const ReadersMap& readers) {
  const auto found = readers.find(y);
  if (found == readers.end() || found->second.size() != 1 || !found->second[0]) return {};
  Node* node = found->second[0];
  if (node->input(0) != y || node->output()->type() != y->type()) return {};
  if (node->op() == "aten::relu") return {node, "relu"};
  if (node->op() == "aten::silu") return {node, "silu"};
  if (node->op() == "aten::sigmoid") return {node, "sigmoid"};
  if (node->op() != "aten::gelu") return {};
  const auto* approximate = std::get_if<std::string>(node->find_attr("approximate"));
  if (!approximate || *approximate == "none") return {node, "gelu"};
  if (*approximate == "tanh") return {node, "gelu_tanh"};
  return {};
}

// The packed weight's header (runtime/onednn_packed.h).
constexpr int64_t kPackedHeaderFloats = 16;

/// The node that alone reads a bias-free linear's product `y` and adds a float32 vector of its
/// outputs to it (core ATen's linear over a non-contiguous 3-D input: a matmul, then the bias
/// added), with that vector; nothing otherwise.
std::pair<Node*, ir::Value*> bias_add_after(const Node& linear, const ReadersMap& readers) {
  const ir::Value* y = linear.output();
  const auto found = readers.find(y);
  if (linear.inputs().size() > 2 || found == readers.end() || found->second.size() != 1 ||
      !found->second[0]) {
    return {};
  }
  Node* add = found->second[0];
  if (add->op() != "aten::add.Tensor" || add->inputs().size() != 2 ||
      add->output()->type() != y->type()) {
    return {};
  }
  if (const ir::Attr* alpha = add->find_attr("alpha")) {
    const auto* i = std::get_if<int64_t>(alpha);
    const auto* d = std::get_if<double>(alpha);
    if (!(i && *i == 1) && !(d && *d == 1.0)) return {};
  }
  ir::Value* other = add->input(0) == y ? add->input(1) : add->input(0);
  const TensorType& b = other->type();
  if (other == y || !is_cpu_float32(b) || b.rank() != 1 || b.sizes[0] != y->type().sizes.back() ||
      b.strides[0] != 1) {
    return {};
  }
  return {add, other};
}

// kiln::onednn_linear in place of `linear` (runtime/onednn_linear.h), with `bias` (the linear's
// own, or one added after it, or null) and `activation`; the dense weight stays an input, to
// pack again where the thread count changed oneDNN's layout.
Node* own_matmul(ir::Graph& graph, Node& linear, int64_t rows, ir::Value* bias_value,
                 const std::string& activation, bool bf16) {
  ir::Value* weight = linear.input(1);
  const bool bias = bias_value != nullptr;
  ir::TensorType packed_type = weight->type();  // the least it can be: oneDNN pads blocks
  packed_type.sizes = {kPackedHeaderFloats + weight->type().numel()};
  packed_type.strides = {1};
  ir::AttrList weight_attrs = {{"rows", rows}, {"bias", bias}};
  if (activation != "none") weight_attrs.emplace_back("activation", activation);
  if (bf16) weight_attrs.emplace_back("precision", std::string("bf16"));
  Node* packed =
      graph.append("kiln::onednn_linear_weight", {weight}, {packed_type}, std::move(weight_attrs));
  packed->output()->set_name(weight->name() + "_onednn");
  std::vector<ir::Value*> inputs = {linear.input(0), weight, packed->output()};
  ir::AttrList attrs;
  if (bias) {
    inputs.push_back(bias_value);
  } else {
    attrs.emplace_back("bias", ir::NoneAttr{});
  }
  if (activation != "none") attrs.emplace_back("activation", activation);
  if (bf16) attrs.emplace_back("precision", std::string("bf16"));
  Node* matmul = graph.append("kiln::onednn_linear", std::move(inputs), {linear.output()->type()},
                              std::move(attrs));
  graph.move_before(packed, &linear);
  return matmul;
}

// kiln::onednn_matmul in place of a linear or mm (`product`), with `bias` (the linear's own, or
// one added after it, or null) and `activation`.
Node* dense_matmul(ir::Graph& graph, Node& product, ir::Value* bias,
                   const std::string& activation) {
  const bool linear = product.op() == "aten::linear";
  std::vector<ir::Value*> inputs = {product.input(0), product.input(1)};
  ir::AttrList attrs;
  if (bias) {
    inputs.push_back(bias);
  } else {
    attrs.emplace_back("bias", ir::NoneAttr{});
  }
  attrs.emplace_back("other_transposed", linear);
  if (activation != "none") attrs.emplace_back("activation", activation);
  return graph.append("kiln::onednn_matmul", std::move(inputs), {product.output()->type()},
                      std::move(attrs));
}

/// A linear that kiln computes in its own kernel (a few rows: one pass over the weight, bound by
/// its reads) reads its frozen weight as bf16: half the bytes, products still in float32.
bool rounds_weight_to_bf16(const Node& node) {
  return kernel::is_contraction(node) && node.input(1)->type().dtype == ir::DType::Float32 &&
         node.input(1)->type().device.kind == ir::DeviceKind::CPU && from_constants(node.input(1));
}

void read_weight_as_bf16(ir::Graph& graph, Node& linear) {
  Node* cast = append_bf16_copy(graph, linear.input(1));
  graph.move_before(cast, &linear);
  linear.replace_input(1, cast->output());
}

}  // namespace

int prepack_linear(ir::Graph& graph, bool own_primitive, bool bf16) {
  std::vector<Node*> linears;
  std::vector<Node*> bf16_weights;
  const int64_t min_macs = own_primitive ? kMinOwnPrimitiveMacs : kMinPrepackedMacs;
  std::vector<Node*> dense;  // products on kiln::onednn_matmul
  for (Node* node : graph.nodes()) {
    if (worth_prepacking(*node, min_macs)) linears.push_back(node);
    if (own_primitive && !bf16 && takes_dense_matmul(*node)) dense.push_back(node);
    if (bf16 && own_primitive && rounds_weight_to_bf16(*node)) bf16_weights.push_back(node);
  }
  for (Node* linear : bf16_weights)
    read_weight_as_bf16(graph, *linear);
  const ReadersMap readers = own_primitive ? readers_of(graph) : ReadersMap{};
  std::vector<Node*> absorbed;  // bias adds and activations now inside a kiln::onednn_linear
  // The bias add and activation after a product, absorbed into it: its replacement's inputs and
  // post-op, and the value that replacement stands for.
  struct Epilogue {
    ir::Value* bias;
    std::string activation;
    ir::Value* result;
  };
  auto absorb_epilogue = [&](Node& product) {
    Epilogue epilogue{product.inputs().size() > 2 ? product.input(2) : nullptr, "none",
                      product.output()};
    if (auto [add, added] = bias_add_after(product, readers); add) {
      epilogue.bias = added;
      epilogue.result = add->output();
      absorbed.push_back(add);
    }
    const Activation after = activation_after(epilogue.result, readers);
    if (after.node) {
      epilogue.result = after.node->output();
      epilogue.activation = after.name;
      absorbed.push_back(after.node);
    }
    return epilogue;
  };
  // The product's replacement, where the last node it replaces was: past every input, the
  // added bias's included.
  auto replace = [&](Node* replacement, const Epilogue& epilogue) {
    replacement->output()->set_name(epilogue.result->name());
    graph.move_before(replacement, epilogue.result->producer());
    graph.replace_all_uses(epilogue.result, replacement->output());
  };
  for (Node* product : dense) {
    const Epilogue epilogue = absorb_epilogue(*product);
    replace(dense_matmul(graph, *product, epilogue.bias, epilogue.activation), epilogue);
  }
  for (Node* linear : linears) {
    const TensorType& x = linear->input(0)->type();
    ir::Value* weight = linear->input(1);
    const int64_t rows = x.numel() / x.sizes.back();
    if (own_primitive) {
      const Epilogue epilogue = absorb_epilogue(*linear);
      replace(own_matmul(graph, *linear, rows, epilogue.bias, epilogue.activation, bf16), epilogue);
      continue;
    }
    Node* packed = graph.append("mkldnn::_reorder_linear_weight", {weight}, {weight->type()},
                                {{"batch_size", rows}});
    packed->output()->set_name(weight->name() + "_packed");
    std::vector<ir::Value*> inputs = {linear->input(0), packed->output()};
    ir::AttrList attrs;
    if (linear->inputs().size() > 2) {
      inputs.push_back(linear->input(2));
    } else {
      attrs.emplace_back("B", ir::NoneAttr{});
    }
    attrs.emplace_back("attr", std::string("none"));
    attrs.emplace_back("scalars", std::vector<int64_t>{});
    attrs.emplace_back("algorithm", std::string(""));
    Node* matmul = graph.append("mkldnn::_linear_pointwise", std::move(inputs),
                                {linear->output()->type()}, std::move(attrs));
    matmul->output()->set_name(linear->output()->name());
    graph.move_before(packed, linear);
    graph.move_before(matmul, linear);
    graph.replace_all_uses(linear->output(), matmul->output());
  }
  graph.remove_nodes_if([&](const Node& n) {
    return std::find(linears.begin(), linears.end(), &n) != linears.end() ||
           std::find(dense.begin(), dense.end(), &n) != dense.end() ||
           std::find(absorbed.begin(), absorbed.end(), &n) != absorbed.end();
  });
  return static_cast<int>(linears.size() + dense.size());
}

}  // namespace kiln
