#include "passes/fold_constants.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_set>

#include "passes/ir/op_table.h"

namespace kiln {
namespace {

constexpr int64_t kMinAllowedBytes = 1 << 20;

std::optional<int64_t> constant_index(const ir::Value* v) {
  const ir::Node* p = v->producer();
  if (!p || p->op() != ir::kConstantOp) return std::nullopt;
  const auto* index = std::get_if<int64_t>(p->find_attr("index"));
  return index ? std::optional(*index) : std::nullopt;
}

int64_t bytes(const ir::TensorType& type) {
  return type.numel() * ir::dtype_size(type.dtype);
}

// A weight transform that a pass added to be computed once, whatever it weighs: the Winograd
// filter (winograd_conv) is 4x its weight, a weight for kiln's oneDNN primitives (onednn_conv,
// prepack_linear) padded to whole blocks.
bool grows_by_design(const ir::Node& node) {
  return node.op() == "kiln::winograd_weight" || node.op() == "kiln::onednn_conv2d_weight" ||
         node.op() == "kiln::onednn_conv3d_weight" || node.op() == "kiln::onednn_linear_weight";
}

// A gather from a table of weights (a relative position bias: a few KB of table, indexed into a
// [window^2, window^2, heads] bias of a megabyte or more) costs a pass over its result every call,
// and no kernel reads through it as one reads through an expand: folded up to this size.
constexpr int64_t kMaxGatherBytes = 16 << 20;

bool is_gather(const ir::Node& node) {
  return node.op() == "aten::index.Tensor" || node.op() == "aten::index_select" ||
         node.op() == "aten::gather";
}

// The graph's outputs and what they view: each call must return tensors of its own there, which
// the caller (or, on the TorchScript path, an in-place op after the region) may write. Folded,
// such a value would be the constant itself, the same tensor every call: a write into it would
// change every later call's result. So what reaches an output is computed at run time, even from
// constants alone.
std::unordered_set<const ir::Value*> returned_values(const ir::Graph& graph) {
  std::unordered_set<const ir::Value*> returned(graph.outputs().begin(), graph.outputs().end());
  const std::vector<ir::Node*> nodes = graph.nodes();
  for (auto node = nodes.rbegin(); node != nodes.rend(); ++node) {
    const ir::OpInfo* info = ir::find_op((*node)->op());
    if (info && info->kind == ir::OpKind::View && !(*node)->inputs().empty() &&
        returned.contains((*node)->output(0))) {
      returned.insert((*node)->input(0));  // a view's first input is what it aliases
    }
  }
  return returned;
}

// Ops outside the op table that are pure and deterministic, so computed once where their tensor
// inputs are constants (factories: where they have none). Masks a model builds from sizes alone
// fold this way: Swin's shifted-window mask (zeros, then slice writes), causal masks (`triu`);
// so do relative position biases, a table of weights indexed by a constant buffer.
// Random ops (`rand`, `dropout`, ...) are not here and never fold.
bool is_pure_extern(std::string_view op) {
  static constexpr std::array<std::string_view, 27> pure = {
      "aten::full",
      "aten::zeros",
      "aten::ones",
      "aten::scalar_tensor",
      "aten::arange",
      "aten::arange.start",
      "aten::arange.start_step",
      "aten::eye",
      "aten::new_zeros",
      "aten::new_ones",
      "aten::new_full",
      "aten::zeros_like",
      "aten::ones_like",
      "aten::full_like",
      "aten::fill.Scalar",
      "aten::fill.Tensor",
      "aten::copy",
      "aten::lift_fresh_copy",
      "aten::slice_scatter",
      "aten::select_scatter",
      "aten::masked_fill.Scalar",
      "aten::masked_fill.Tensor",
      "aten::tril",
      "aten::triu",
      "aten::index.Tensor",
      "aten::index_select",
      "aten::gather",
  };
  return std::find(pure.begin(), pure.end(), op) != pure.end();
}

// Ops that read their first input for its type alone (dtype, sizes, device), never its values:
// `x.new_zeros(...)`, `torch.zeros_like(x)`. That input need not be a constant.
bool reads_type_only(std::string_view op) {
  return op == "aten::new_zeros" || op == "aten::new_ones" || op == "aten::new_full" ||
         op == "aten::zeros_like" || op == "aten::ones_like" || op == "aten::full_like";
}

}  // namespace

bool from_constants(const ir::Value* value) {
  const ir::Node* p = value->producer();
  if (!p) return false;
  if (p->op() == ir::kConstantOp) return true;
  const bool in_op_table = ir::find_op(p->op()) != nullptr;
  if (!in_op_table && !is_pure_extern(p->op())) return false;
  if (in_op_table && p->inputs().empty()) return false;  // a pure extern factory has none
  for (size_t i = 0; i < p->inputs().size(); ++i) {
    if (i == 0 && reads_type_only(p->op())) continue;
    if (!from_constants(p->input(i))) return false;
  }
  return true;
}

int fold_constants(ir::Graph& graph, const ConstantEvaluator& evaluate) {
  int folded = 0;
  std::unordered_set<const ir::Node*> replaced;
  const std::unordered_set<const ir::Value*> returned = returned_values(graph);
  for (ir::Node* node : graph.nodes()) {
    const ir::OpInfo* info = ir::find_op(node->op());
    const bool pure_extern = !info && is_pure_extern(node->op());
    if ((!info && !pure_extern) || (info && info->kind == ir::OpKind::Constant) ||
        node->outputs().size() != 1 || node->subgraph() ||
        (node->inputs().empty() && !pure_extern) || returned.contains(node->output())) {
      continue;
    }
    std::vector<int64_t> inputs;
    int64_t input_bytes = 0;
    for (const ir::Value* in : node->inputs()) {
      auto index = constant_index(in);
      if (!index && inputs.empty() && reads_type_only(node->op())) {
        inputs.push_back(kTypeOnlyInput);
        continue;
      }
      if (!index) break;
      inputs.push_back(*index);
      input_bytes += bytes(in->type());
    }
    if (inputs.size() != node->inputs().size()) continue;
    const int64_t allowed = is_gather(*node) ? kMaxGatherBytes : kMinAllowedBytes;
    if (bytes(node->output()->type()) > std::max(input_bytes, allowed) && !grows_by_design(*node)) {
      continue;
    }
    auto index = evaluate(*node, inputs);
    if (!index) continue;
    // The constant takes the node's place, so everything after it sees a constant input.
    ir::Node* constant =
        graph.append(ir::kConstantOp, {}, {node->output()->type()}, {{"index", *index}});
    constant->output()->set_name(node->output()->name());
    graph.move_before(constant, node);
    graph.replace_all_uses(node->output(), constant->output());
    replaced.insert(node);
    ++folded;
  }
  graph.remove_nodes_if([&](const ir::Node& n) { return replaced.contains(&n); });
  return folded;
}

}  // namespace kiln
