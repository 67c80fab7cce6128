#include "passes/prepack_conv.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/assign_layout.h"
#include "passes/fold_constants.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

const std::vector<int64_t>* ints(const Node& node, const char* name) {
  return std::get_if<std::vector<int64_t>>(node.find_attr(name));
}

bool is_channels_last_float32_cpu(const TensorType& type) {
  return type.rank() == 4 && type.dtype == ir::DType::Float32 &&
         type.device.kind == ir::DeviceKind::CPU &&
         type.strides == channels_last_strides(type.sizes);
}

// A plain 2-D convolution (conv2d, or convolution / tracing's _convolution not transposed and
// without output padding) with numeric padding, a frozen 4-D weight and channels-last float32
// input and output.
bool can_prepack(const Node& node) {
  const std::string& op = node.op();
  if (op != "aten::conv2d" && op != "aten::convolution" && op != "aten::_convolution") {
    return false;
  }
  if (op != "aten::conv2d") {
    const auto* transposed = std::get_if<bool>(node.find_attr("transposed"));
    const auto* output_padding = ints(node, "output_padding");
    if (!transposed || *transposed || !output_padding) return false;
    if (std::any_of(output_padding->begin(), output_padding->end(), [](int64_t p) { return p; }))
      return false;
  }
  for (const char* name : {"stride", "padding", "dilation"}) {
    const auto* list = ints(node, name);
    if (!list || list->size() != 2) return false;
  }
  if (!std::get_if<int64_t>(node.find_attr("groups"))) return false;
  if (node.inputs().size() < 2 || !from_constants(node.input(1))) return false;
  const TensorType& w = node.input(1)->type();
  if (w.rank() != 4 || w.dtype != ir::DType::Float32) return false;
  if (node.inputs().size() > 2 && node.input(2)->type().rank() != 1) return false;
  return is_channels_last_float32_cpu(node.input(0)->type()) &&
         is_channels_last_float32_cpu(node.output()->type());
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
  explicit ConvPrepacker(ir::Graph& graph) : graph_(graph) {
    for (Node* node : graph.nodes())
      for (const Value* in : node->inputs())
        users_[in].push_back(node);
    for (const Value* out : graph.outputs())
      users_[out].push_back(nullptr);
  }

  int run() {
    int rewritten = 0;
    for (Node* conv : graph_.nodes()) {
      if (can_prepack(*conv)) {
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
    Node* packed =
        graph_.append("aten::mkldnn_reorder_conv2d_weight", {dense->output()}, {weight->type()},
                      {{"padding", attr("padding")},
                       {"stride", attr("stride")},
                       {"dilation", attr("dilation")},
                       {"groups", attr("groups")},
                       {"input_size", conv.input(0)->type().sizes}});
    packed->output()->set_name(weight->name() + "_packed");

    // A relu or hardtanh that alone reads the convolution's output runs inside it.
    Value* result = conv.output();
    std::vector<double> scalars;
    std::string activation = "none";
    const auto& users = users_[conv.output()];
    if (users.size() == 1 && users[0]) {
      const std::string fused = post_op(*users[0], scalars);
      if (!fused.empty() && users[0]->output()->type() == conv.output()->type()) {
        activation = fused;
        result = users[0]->output();
        removed_.insert(users[0]);
      }
    }
    std::vector<Value*> inputs = {conv.input(0), packed->output()};
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
    attrs.emplace_back("attr", activation);
    attrs.emplace_back("scalars", scalars);
    attrs.emplace_back("algorithm", std::string(""));
    Node* onednn = graph_.append("mkldnn::_convolution_pointwise", std::move(inputs),
                                 {result->type()}, std::move(attrs));
    onednn->output()->set_name(result->name());
    for (Node* added : {dense, packed, onednn})
      graph_.move_before(added, &conv);
    graph_.replace_all_uses(result, onednn->output());
    removed_.insert(&conv);
  }

  ir::Graph& graph_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
  std::unordered_set<const Node*> removed_;
};

}  // namespace

int prepack_conv(ir::Graph& graph) {
  return ConvPrepacker(graph).run();
}

}  // namespace kiln
