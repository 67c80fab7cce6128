#include "passes/prepack_linear.h"

#include "passes/fold_constants.h"
#include "passes/kernel/lower_ops.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;

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
  return rows * n * k >= min_macs;
}

// The packed weight's header (runtime/onednn_packed.h).
constexpr int64_t kPackedHeaderFloats = 16;

// kiln::onednn_linear in place of `linear` (runtime/onednn_linear.h); the dense weight stays an
// input, to pack again where the thread count changed oneDNN's layout.
Node* own_matmul(ir::Graph& graph, Node& linear, int64_t rows) {
  ir::Value* weight = linear.input(1);
  const bool bias = linear.inputs().size() > 2;
  ir::TensorType packed_type = weight->type();  // the least it can be: oneDNN pads blocks
  packed_type.sizes = {kPackedHeaderFloats + weight->type().numel()};
  packed_type.strides = {1};
  Node* packed = graph.append("kiln::onednn_linear_weight", {weight}, {packed_type},
                              {{"rows", rows}, {"bias", bias}});
  packed->output()->set_name(weight->name() + "_onednn");
  std::vector<ir::Value*> inputs = {linear.input(0), weight, packed->output()};
  ir::AttrList attrs;
  if (bias) {
    inputs.push_back(linear.input(2));
  } else {
    attrs.emplace_back("bias", ir::NoneAttr{});
  }
  Node* matmul = graph.append("kiln::onednn_linear", std::move(inputs), {linear.output()->type()},
                              std::move(attrs));
  graph.move_before(packed, &linear);
  return matmul;
}

}  // namespace

int prepack_linear(ir::Graph& graph, bool own_primitive) {
  std::vector<Node*> linears;
  const int64_t min_macs = own_primitive ? kMinOwnPrimitiveMacs : kMinPrepackedMacs;
  for (Node* node : graph.nodes()) {
    if (worth_prepacking(*node, min_macs)) linears.push_back(node);
  }
  for (Node* linear : linears) {
    const TensorType& x = linear->input(0)->type();
    ir::Value* weight = linear->input(1);
    const int64_t rows = x.numel() / x.sizes.back();
    if (own_primitive) {
      Node* matmul = own_matmul(graph, *linear, rows);
      matmul->output()->set_name(linear->output()->name());
      graph.move_before(matmul, linear);
      graph.replace_all_uses(linear->output(), matmul->output());
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
    return std::find(linears.begin(), linears.end(), &n) != linears.end();
  });
  return static_cast<int>(linears.size());
}

}  // namespace kiln
