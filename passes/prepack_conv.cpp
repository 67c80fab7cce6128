#include "passes/prepack_conv.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/assign_layout.h"
#include "passes/fold_constants.h"
#include "passes/ir/op_table.h"
#include "passes/node_rewriter.h"
#include "passes/winograd_conv.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

bool is_channels_last_float32_cpu(const TensorType& type, int64_t rank) {
  return type.rank() == rank && type.dtype == ir::DType::Float32 &&
         type.device.kind == ir::DeviceKind::CPU &&
         type.strides == channels_last_strides(type.sizes);
}

// A plain 2-D or 3-D convolution (conv2d, conv3d, or convolution / tracing's _convolution not
// transposed and without output padding) with numeric padding, a frozen 4-D or 5-D weight and
// channels-last (NHWC, NDHWC) float32 input and output. `any_input_layout`: kiln's own primitive
// will run it, which copies an input of other strides to channels-last itself (a channel slice
// of a channels-last tensor: SKNet's and Res2Net's split branches), so the input may have any.
bool can_prepack(const Node& node, bool any_input_layout) {
  if (!is_forward_conv(node)) return false;
  if (node.inputs().size() < 2 || !from_constants(node.input(1))) return false;
  const TensorType& w = node.input(1)->type();
  if ((w.rank() != 4 && w.rank() != 5) || w.dtype != ir::DType::Float32) return false;
  for (const char* name : {"stride", "padding", "dilation"}) {
    const auto* list = int_list_attr(node, name);
    if (!list || static_cast<int64_t>(list->size()) != w.rank() - 2) return false;
  }
  if (!std::get_if<int64_t>(node.find_attr("groups"))) return false;
  if (node.inputs().size() > 2 && node.input(2)->type().rank() != 1) return false;
  const TensorType& x = node.input(0)->type();
  const bool input_taken = any_input_layout
                               ? x.rank() == w.rank() && x.dtype == ir::DType::Float32 &&
                                     x.device.kind == ir::DeviceKind::CPU
                               : is_channels_last_float32_cpu(x, w.rank());
  return input_taken && is_channels_last_float32_cpu(node.output()->type(), w.rank());
}

// ATen's reorder of a dense weight into oneDNN's layout, by the convolution's rank.
const char* reorder_op(const TensorType& weight) {
  return weight.rank() == 5 ? "aten::mkldnn_reorder_conv3d_weight"
                            : "aten::mkldnn_reorder_conv2d_weight";
}

// The post-op oneDNN applies for `user`, or "" when it has none: relu, and hardtanh (relu6 and
// other clamps) with its bounds.
std::string post_op(const Node& user, std::vector<double>& scalars) {
  if (user.op() == "aten::relu") return "relu";
  if (user.op() == "aten::hardtanh") {
    const auto* lo = std::get_if<double>(user.find_attr("min_val"));
    const auto* hi = std::get_if<double>(user.find_attr("max_val"));
    if (!lo || !hi) return "";
    scalars = {*lo, *hi};
    return "hardtanh";
  }
  return "";
}

class ConvPrepacker {
 public:
  ConvPrepacker(ir::Graph& graph, bool residual_anywhere)
      : graph_(graph), residual_anywhere_(residual_anywhere), users_(readers_of(graph)) {}

  int run() {
    int rewritten = 0;
    for (Node* conv : graph_.nodes()) {
      if (can_prepack(*conv, residual_anywhere_)) {
        rewrite(*conv);
        ++rewritten;
      }
    }
    graph_.remove_nodes_if([&](const Node& n) { return removed_.contains(&n); });
    return rewritten;
  }

 private:
  void rewrite(Node& conv) {
    Value* weight = conv.input(1);
    const auto& attr = [&](const char* name) { return *conv.find_attr(name); };
    Node* dense =
        graph_.append("aten::to_mkldnn", {weight}, {weight->type()}, {{"dtype", ir::NoneAttr{}}});
    dense->output()->set_name(weight->name() + "_mkldnn");
    Node* packed = graph_.append(reorder_op(weight->type()), {dense->output()}, {weight->type()},
                                 {{"padding", attr("padding")},
                                  {"stride", attr("stride")},
                                  {"dilation", attr("dilation")},
                                  {"groups", attr("groups")},
                                  {"input_size", conv.input(0)->type().sizes}});
    packed->output()->set_name(weight->name() + "_packed");

    // A residual add that alone reads the convolution's output (the other operand alike in
    // type), and a relu or hardtanh that alone reads the convolution (a relu, the add), run
    // inside it.
    Value* result = conv.output();
    Node* residual = sole_user(conv.output());
    Value* other = residual ? residual_operand(*residual, conv.output()) : nullptr;
    if (other && !residual_anywhere_ && !written_in_place(other, *residual) &&
        !winograd_takes(conv, *weight)) {
      other = nullptr;
    }
    Node* anchor = &conv;
    if (other) {
      result = residual->output();
      removed_.insert(residual);
      anchor = residual;  // the other operand may be computed after the convolution
    }
    std::vector<double> scalars;
    std::string activation;
    if (Node* user = sole_user(result)) {
      activation = post_op(*user, scalars);
      // oneDNN's binary form takes relu alone after the add ("Unary Fusion behavior undefined"
      // for any other); a hardtanh after a residual add stays a kernel of its own.
      if (other && activation != "relu") activation.clear();
      if (!activation.empty() && user->output()->type() == result->type()) {
        result = user->output();
        removed_.insert(user);
      } else {
        activation.clear();
      }
    }
    std::vector<Value*> inputs = {conv.input(0)};
    if (other) inputs.push_back(other);
    inputs.push_back(packed->output());
    ir::AttrList attrs;
    if (conv.inputs().size() > 2) {
      inputs.push_back(conv.input(2));
    } else {
      attrs.emplace_back("B", ir::NoneAttr{});
    }
    attrs.emplace_back("padding", attr("padding"));
    attrs.emplace_back("stride", attr("stride"));
    attrs.emplace_back("dilation", attr("dilation"));
    attrs.emplace_back("groups", attr("groups"));
    std::string op = "mkldnn::_convolution_pointwise";
    if (other) {
      op += ".binary";
      attrs.emplace_back("binary_attr", std::string("add"));
      attrs.emplace_back("alpha", ir::NoneAttr{});
      attrs.emplace_back("unary_attr",
                         activation.empty() ? ir::Attr(ir::NoneAttr{}) : ir::Attr(activation));
      attrs.emplace_back("unary_scalars", scalars);
      attrs.emplace_back("unary_algorithm", ir::NoneAttr{});
    } else {
      attrs.emplace_back("attr", activation.empty() ? std::string("none") : activation);
      attrs.emplace_back("scalars", scalars);
      attrs.emplace_back("algorithm", std::string(""));
    }
    Node* onednn = graph_.append(op, std::move(inputs), {result->type()}, std::move(attrs));
    onednn->output()->set_name(result->name());
    for (Node* added : {dense, packed, onednn})
      graph_.move_before(added, anchor);
    graph_.replace_all_uses(result, onednn->output());
    removed_.insert(&conv);
  }

  /// The one node that reads `value` (not a graph output), unless an earlier fusion took it.
  Node* sole_user(const Value* value) {
    const auto& users = users_[value];
    if (users.size() != 1 || !users[0] || removed_.contains(users[0])) return nullptr;
    return users[0];
  }

  /// Whether oneDNN's binary convolution can take `other` as its output at run time
  /// (runtime/in_place_extern.h): a convolution's own output (not a kernel's, which lives in the
  /// memory plan's arena), read last by `add`. Where it cannot, the functional form copies
  /// `other` first and is slower than the plain convolution and an add kernel after it (on 2
  /// threads, 1x1 convolutions at 16-256 channels: 1.3-2.4x the plain one's time, against
  /// 1.1-1.5x with the add apart; in place, 1.0-1.15x).
  bool written_in_place(const Value* other, const Node& add) {
    const Node* producer = other->producer();
    const ir::OpInfo* info = producer ? ir::find_op(producer->op()) : nullptr;
    if (!info || info->kind != ir::OpKind::Convolution) return false;
    const auto& outputs = graph_.outputs();
    if (std::find(outputs.begin(), outputs.end(), other) != outputs.end()) return false;
    // Scanned in the graph as it is now: `other` may be an earlier rewrite's output, which
    // users_ does not know.
    bool after_add = false;
    for (const Node* node : graph_.nodes()) {
      if (node == &add) {
        after_add = true;
      } else if (after_add && !removed_.contains(node)) {
        const auto& inputs = node->inputs();
        if (std::find(inputs.begin(), inputs.end(), other) != inputs.end()) return false;
      }
    }
    return true;
  }

  /// For `add.Tensor(conv, other)` (either order, alpha 1) with `other` of the convolution's
  /// type: `other`, which oneDNN then adds to the convolution's result.
  Value* residual_operand(const Node& add, const Value* conv) const {
    if (add.op() != "aten::add.Tensor" || add.inputs().size() != 2) return nullptr;
    const ir::Attr* alpha = add.find_attr("alpha");
    const auto* int_alpha = alpha ? std::get_if<int64_t>(alpha) : nullptr;
    const auto* float_alpha = alpha ? std::get_if<double>(alpha) : nullptr;
    if (alpha && !(int_alpha && *int_alpha == 1) && !(float_alpha && *float_alpha == 1.0)) {
      return nullptr;
    }
    Value* other = add.input(0) == conv ? add.input(1) : add.input(0);
    if (other == conv || other->type() != conv->type()) return nullptr;
    if (add.output()->type() != conv->type()) return nullptr;
    // ATen's functional binary form cannot describe an output of one pixel per image ("could
    // not create a memory" for [N, C, 1, 1], whatever the strides): such an add stays outside,
    // unless kiln's own primitive will run the convolution.
    const std::vector<int64_t>& sizes = conv->type().sizes;
    if (!residual_anywhere_ &&
        std::all_of(sizes.begin() + 2, sizes.end(), [](int64_t s) { return s == 1; }))
      return nullptr;
    return other;
  }

  ir::Graph& graph_;
  const bool residual_anywhere_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_set<const Node*> removed_;
};

}  // namespace

int prepack_conv(ir::Graph& graph, bool residual_anywhere) {
  return ConvPrepacker(graph, residual_anywhere).run();
}

void release_packed_weight(ir::Value& packed, std::unordered_map<const ir::Value*, int>& readers,
                           std::unordered_set<const ir::Node*>& removed) {
  if (--readers[&packed] > 0) return;
  Node* reorder = packed.producer();
  removed.insert(reorder);
  if (--readers[reorder->input(0)] == 0) removed.insert(reorder->input(0)->producer());
}

ir::Value* prepacked_dense_weight(const ir::Value& packed) {
  const Node* reorder = packed.producer();
  if (!reorder || (reorder->op() != "aten::mkldnn_reorder_conv2d_weight" &&
                   reorder->op() != "aten::mkldnn_reorder_conv3d_weight")) {
    return nullptr;
  }
  const Node* to_mkldnn = reorder->input(0)->producer();
  if (!to_mkldnn || to_mkldnn->op() != "aten::to_mkldnn") return nullptr;
  Value* weight = to_mkldnn->input(0);
  return from_constants(weight) ? weight : nullptr;
}

}  // namespace kiln
