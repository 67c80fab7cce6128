#include "passes/onednn_conv.h"

#include <unordered_map>
#include <unordered_set>

#include "passes/prepack_conv.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr int64_t kHeaderFloats = 16;  // runtime/onednn_conv.h: the packed weight's header

bool is_none(const ir::Attr* attr) {
  return attr && std::holds_alternative<ir::NoneAttr>(*attr);
}

/// A oneDNN convolution's post-op as onednn_conv2d's activation and scalars; false for one it
/// does not take (a binary op other than a plain add, an unknown unary).
bool read_activation(const Node& conv, bool binary, std::string& activation,
                     std::vector<double>& scalars) {
  const ir::Attr* unary = conv.find_attr(binary ? "unary_attr" : "attr");
  const auto* values =
      std::get_if<std::vector<double>>(conv.find_attr(binary ? "unary_scalars" : "scalars"));
  if (binary) {
    const auto* op = std::get_if<std::string>(conv.find_attr("binary_attr"));
    if (!op || *op != "add" || !is_none(conv.find_attr("alpha"))) return false;
    if (is_none(unary)) {
      activation = "none";
      return true;
    }
  }
  const auto* name = unary ? std::get_if<std::string>(unary) : nullptr;
  if (!name) return false;
  activation = *name;
  if (activation == "none" || activation == "relu") return true;
  if (activation == "hardtanh" && values && values->size() == 2) {
    scalars = *values;
    return true;
  }
  return false;
}

class OneDnnConvRewriter {
 public:
  explicit OneDnnConvRewriter(ir::Graph& graph) : graph_(graph), readers_(ir::count_uses(graph)) {}

  int run() {
    int rewritten = 0;
    for (Node* conv : graph_.nodes()) {
      if (rewrite(*conv)) ++rewritten;
    }
    graph_.remove_nodes_if([&](const Node& n) { return removed_.contains(&n); });
    return rewritten;
  }

 private:
  bool rewrite(Node& conv) {
    const bool binary = conv.op() == "mkldnn::_convolution_pointwise.binary";
    if (!binary && conv.op() != "mkldnn::_convolution_pointwise") return false;
    std::string activation;
    std::vector<double> scalars;
    if (!read_activation(conv, binary, activation, scalars)) return false;
    // Inputs: x, [other,] packed weight[, bias]; a missing bias is the attr B=None.
    const size_t weight_at = binary ? 2 : 1;
    if (conv.inputs().size() <= weight_at) return false;
    Value* packed = conv.input(weight_at);
    Value* weight = prepacked_dense_weight(*packed);
    if (!weight) return false;
    const bool has_bias = conv.inputs().size() > weight_at + 1;
    const auto& attr = [&](const char* name) { return *conv.find_attr(name); };

    // Its real length is oneDNN's to choose (blocks padded): at least the header and the weight.
    ir::TensorType packed_type = weight->type();
    packed_type.sizes = {kHeaderFloats + weight->type().numel()};
    packed_type.strides = {1};
    Node* pack = graph_.append("kiln::onednn_conv2d_weight", {weight}, {packed_type},
                               {{"input_size", conv.input(0)->type().sizes},
                                {"stride", attr("stride")},
                                {"padding", attr("padding")},
                                {"dilation", attr("dilation")},
                                {"groups", attr("groups")},
                                {"bias", has_bias},
                                {"residual", binary},
                                {"activation", activation},
                                {"scalars", scalars}});
    pack->output()->set_name(weight->name() + "_onednn");

    std::vector<Value*> inputs = {conv.input(0), weight, pack->output()};
    ir::AttrList attrs;
    if (has_bias) {
      inputs.push_back(conv.input(weight_at + 1));
    } else {
      attrs.emplace_back("bias", ir::NoneAttr{});
    }
    if (binary) {
      inputs.push_back(conv.input(1));
    } else {
      attrs.emplace_back("other", ir::NoneAttr{});
    }
    for (const char* name : {"stride", "padding", "dilation", "groups"})
      attrs.emplace_back(name, attr(name));
    attrs.emplace_back("activation", activation);
    attrs.emplace_back("scalars", scalars);
    Node* onednn = graph_.append("kiln::onednn_conv2d", std::move(inputs), {conv.output()->type()},
                                 std::move(attrs));
    onednn->output()->set_name(conv.output()->name());
    graph_.move_before(pack, &conv);
    graph_.move_before(onednn, &conv);
    graph_.replace_all_uses(conv.output(), onednn->output());
    removed_.insert(&conv);
    drop_if_unread(packed);
    return true;
  }

  /// Removes the packing chain behind `packed` once the rewritten convolution was its only reader.
  void drop_if_unread(Value* packed) {
    if (--readers_[packed] > 0) return;
    Node* reorder = packed->producer();
    removed_.insert(reorder);
    if (--readers_[reorder->input(0)] == 0) removed_.insert(reorder->input(0)->producer());
  }

  ir::Graph& graph_;
  std::unordered_map<const Value*, int> readers_;
  std::unordered_set<const Node*> removed_;
};

}  // namespace

int onednn_conv(ir::Graph& graph) {
  return OneDnnConvRewriter(graph).run();
}

}  // namespace kiln
