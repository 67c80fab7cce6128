#include "passes/conv_as_linear.h"

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "passes/fold_constants.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

const std::vector<int64_t>* ints(const Node& node, const char* name) {
  return std::get_if<std::vector<int64_t>>(node.find_attr(name));
}

bool is_cpu_float32(const TensorType& type) {
  return type.dtype == ir::DType::Float32 && type.device.kind == ir::DeviceKind::CPU;
}

bool all_zero(const std::vector<int64_t>* list) {
  return list && std::all_of(list->begin(), list->end(), [](int64_t v) { return v == 0; });
}

// A 2-D convolution (not transposed, no output padding, no padding, one group) of a frozen
// float32 [O, C, 1, 1] weight over a float32 [N, C, 1, 1] input: each output is a dot product of
// the input's channels with a row of the weight.
bool sees_one_pixel(const Node& node) {
  const std::string& op = node.op();
  if (op != "aten::conv2d" && op != "aten::convolution" && op != "aten::_convolution") {
    return false;
  }
  if (op != "aten::conv2d") {
    const auto* transposed = std::get_if<bool>(node.find_attr("transposed"));
    if (!transposed || *transposed || !all_zero(ints(node, "output_padding"))) return false;
  }
  const auto* groups = std::get_if<int64_t>(node.find_attr("groups"));
  if (!groups || *groups != 1 || !all_zero(ints(node, "padding"))) return false;
  if (node.inputs().size() < 2 || !from_constants(node.input(1))) return false;
  const TensorType& x = node.input(0)->type();
  const TensorType& w = node.input(1)->type();
  const TensorType& y = node.output()->type();
  if (!is_cpu_float32(x) || !is_cpu_float32(w) || !is_cpu_float32(y)) return false;
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return false;
  if (x.sizes[2] != 1 || x.sizes[3] != 1 || w.sizes[2] != 1 || w.sizes[3] != 1) return false;
  if (w.sizes[1] != x.sizes[1] || y.sizes != std::vector<int64_t>{x.sizes[0], w.sizes[0], 1, 1}) {
    return false;
  }
  if (node.inputs().size() > 2) {
    const TensorType& b = node.input(2)->type();
    if (!is_cpu_float32(b) || b.rank() != 1) return false;
  }
  return true;
}

/// `value` viewed as `type` (its sizes and strides, which the caller makes agree with the data).
Value* view(ir::Graph& graph, Value* value, TensorType type, Node* before, const char* suffix) {
  std::vector<int64_t> sizes = type.sizes;
  Node* node = graph.append("aten::view", {value}, {std::move(type)}, {{"size", std::move(sizes)}});
  graph.move_before(node, before);
  if (!value->name().empty()) node->output()->set_name(value->name() + suffix);
  return node->output();
}

void rewrite(ir::Graph& graph, Node& conv) {
  Value* x = conv.input(0);
  Value* w = conv.input(1);
  // Dropping two dims of size 1 keeps every stride of the others: always a view.
  TensorType x_rows = x->type();
  x_rows.sizes.resize(2);
  x_rows.strides.resize(2);
  TensorType w_rows = w->type();
  w_rows.sizes.resize(2);
  w_rows.strides.resize(2);
  TensorType y_rows = conv.output()->type();
  y_rows.sizes.resize(2);
  y_rows.strides = ir::contiguous_strides(y_rows.sizes);

  std::vector<Value*> inputs = {view(graph, x, x_rows, &conv, "_rows"),
                                view(graph, w, w_rows, &conv, "_rows")};
  ir::AttrList attrs;
  if (conv.inputs().size() > 2) {
    inputs.push_back(conv.input(2));
  } else {
    attrs.emplace_back("bias", ir::NoneAttr{});
  }
  Node* linear = graph.append("aten::linear", std::move(inputs), {y_rows}, std::move(attrs));
  graph.move_before(linear, &conv);
  if (!conv.output()->name().empty()) linear->output()->set_name(conv.output()->name() + "_rows");
  // Back to the convolution's type: its strides on the two size-1 dims are whatever its layout
  // said; the data is the same.
  Value* y = view(graph, linear->output(), conv.output()->type(), &conv, "");
  y->set_name(conv.output()->name());
  graph.replace_all_uses(conv.output(), y);
}

}  // namespace

int conv_as_linear(ir::Graph& graph) {
  std::vector<Node*> convs;
  for (Node* node : graph.nodes()) {
    if (sees_one_pixel(*node)) convs.push_back(node);
  }
  for (Node* conv : convs)
    rewrite(graph, *conv);
  graph.remove_nodes_if(
      [&](const Node& n) { return std::find(convs.begin(), convs.end(), &n) != convs.end(); });
  return static_cast<int>(convs.size());
}

}  // namespace kiln
