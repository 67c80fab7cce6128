#include "passes/onednn_conv.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "passes/assign_layout.h"
#include "passes/node_rewriter.h"
#include "passes/prepack_conv.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr int64_t kHeaderFloats = 16;  // runtime/onednn_conv.h: the packed weight's header

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

bool is_scalar_op(const Node& node, const char* op, double other) {
  if (node.op() != op || number_attr(node, "other") != other) return false;
  return !node.find_attr("alpha") || number_attr(node, "alpha") == 1.0;
}

/// clamp(x) {min=lo, max=None} (hi absent) or {min=None, max=hi} (lo absent).
bool is_one_sided_clamp(const Node& node, std::optional<double> lo, std::optional<double> hi) {
  if (node.op() != "aten::clamp") return false;
  return number_attr(node, "min") == lo && number_attr(node, "max") == hi &&
         is_none(node.find_attr(lo ? "max" : "min"));
}

/// Whether two types describe the same memory: equal but for the strides of dims of size 1
/// (a [N, C, 1, 1] squeeze-excitation gate is as channels-last as it is contiguous).
bool same_layout(const ir::TensorType& a, const ir::TensorType& b) {
  if (a.sizes != b.sizes || a.dtype != b.dtype || !(a.device == b.device) ||
      a.strides.size() != b.strides.size()) {
    return false;
  }
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] != 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

/// An activation after a convolution that oneDNN applies as a post-op, as the graph spells it
/// (whole, or as torch.compile decomposes it), with the nodes it takes and its result.
struct Activation {
  std::string name;
  std::vector<Node*> nodes;
  Value* result = nullptr;
};

/// Whether a convolution with this [K, C / groups, [kd,] kh, kw] weight, `groups` and `stride`
/// multiplies each input value into enough outputs for bf16 to pay. A depthwise or
/// narrow-grouped one (MobileNet's, EfficientNet's, RegNet's 8-wide groups) is bound by memory,
/// not multiplies; kiln's activations are float32, so in bf16 it would only add the rounding of
/// its input, a pass over it, and error. A dense one over few channels (a network's 3-channel
/// stem) pays where each input value meets many weights: K / groups * kh * kw / (sh * sw) (and
/// likewise over a 3-D convolution's depth), 784
/// for ResNet's 7x7 stride-2 stem, 192 for a ViT's 16x16 patches, 96 for ConvNeXt's 4x4 ones,
/// against 72 for MobileNet's 3x3 stride-2 stem, which bf16 does not speed up (docs/precision.md).
bool multiplies_enough_for_bf16(const ir::TensorType& weight, int64_t groups,
                                const std::vector<int64_t>& stride) {
  if ((weight.rank() != 4 && weight.rank() != 5) || groups < 1 ||
      static_cast<int64_t>(stride.size()) != weight.rank() - 2) {
    return false;
  }
  if (weight.sizes[1] >= kMinBf16ChannelsPerGroup) return true;
  int64_t uses = weight.sizes[0] / groups;
  int64_t step = 1;
  for (size_t d = 0; d < stride.size(); ++d) {
    if (stride[d] < 1) return false;
    uses *= weight.sizes[2 + d];
    step *= stride[d];
  }
  return uses / step >= kMinBf16UsesPerInput;
}

class OneDnnConvRewriter : public NodeRewriter {
 public:
  OneDnnConvRewriter(ir::Graph& graph, bool bf16)
      : NodeRewriter(graph),
        bf16_(bf16),
        readers_(ir::count_uses(graph)),
        users_(readers_of(graph)) {}

 private:
  bool applies(const Node& node) const override {
    return node.op() == "mkldnn::_convolution_pointwise" ||
           node.op() == "mkldnn::_convolution_pointwise.binary";
  }

  bool rewrite(Node& conv) override {
    const bool binary = conv.op() == "mkldnn::_convolution_pointwise.binary";
    std::string activation;
    std::vector<double> scalars;
    if (!read_activation(conv, binary, activation, scalars)) return false;
    std::optional<Activation> after;
    if (activation == "none") after = activation_after(conv.output());
    if (after) activation = after->name;
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
    ir::AttrList pack_attrs = {{"input_size", conv.input(0)->type().sizes},
                               {"stride", attr("stride")},
                               {"padding", attr("padding")},
                               {"dilation", attr("dilation")},
                               {"groups", attr("groups")},
                               {"bias", has_bias},
                               {"residual", binary},
                               {"activation", activation},
                               {"scalars", scalars}};
    const auto* groups = std::get_if<int64_t>(conv.find_attr("groups"));
    const auto* stride = std::get_if<std::vector<int64_t>>(conv.find_attr("stride"));
    const bool bf16 =
        bf16_ && groups && stride && multiplies_enough_for_bf16(weight->type(), *groups, *stride);
    if (bf16) pack_attrs.emplace_back("precision", std::string("bf16"));
    const std::string op =
        weight->type().rank() == 5 ? "kiln::onednn_conv3d" : "kiln::onednn_conv2d";
    Node* pack = graph_.append(op + "_weight", {weight}, {packed_type}, std::move(pack_attrs));
    pack->output()->set_name(weight->name() + "_onednn");

    std::vector<Value*> inputs = {image_behind(conv.input(0)), weight, pack->output()};
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
    if (bf16) attrs.emplace_back("precision", std::string("bf16"));
    Node* onednn = graph_.append(op, std::move(inputs), {conv.output()->type()}, std::move(attrs));
    Value* result = after ? after->result : conv.output();
    onednn->output()->set_name(result->name());
    graph_.move_before(pack, &conv);
    graph_.move_before(onednn, &conv);
    graph_.replace_all_uses(result, onednn->output());
    removed_.insert(&conv);
    if (after) removed_.insert(after->nodes.begin(), after->nodes.end());
    release_packed_weight(*packed, readers_, removed_);
    return true;
  }

  /// The dense NCHW (NCDHW) tensor that `input` is the channels-last copy of (assign_layout's,
  /// read by this convolution alone), taking the copy out of the graph: the op converts it with
  /// oneDNN's reorder, several times faster for a network's 3-channel image than the copy kernel
  /// kiln generates. Otherwise `input` itself.
  Value* image_behind(Value* input) {
    Node* copy = input->producer();
    if (!copy || copy->op() != "aten::_to_copy" || users(input).size() != 1) return input;
    const auto* format = std::get_if<int64_t>(copy->find_attr("memory_format"));
    for (const char* name : {"dtype", "layout", "device"}) {
      if (!is_none(copy->find_attr(name))) return input;
    }
    Value* image = copy->input(0);
    const ir::TensorType& type = image->type();
    if (!format || (type.rank() != 4 && type.rank() != 5) ||
        *format != channels_last_format(type.rank()) || type.dtype != ir::DType::Float32 ||
        type.sizes != input->type().sizes || type.strides != ir::contiguous_strides(type.sizes)) {
      return input;
    }
    removed_.insert(copy);
    return image;
  }

  /// The nodes reading `value`; a null one for a graph output.
  const std::vector<Node*>& users(const Value* value) { return users_[value]; }

  /// The one node reading `value`, if it is `op` and keeps its type.
  Node* sole(const Value* value, const char* op) {
    const auto& readers = users(value);
    if (readers.size() != 1 || !readers[0] || readers[0]->op() != op) return nullptr;
    return same_layout(readers[0]->output()->type(), value->type()) ? readers[0] : nullptr;
  }

  /// For `add` = y + 3 followed by clamp(min=0) and clamp(max=6), each read only by the next:
  /// the last clamp.
  Node* relu6_of_plus_3(Node* add, const Value* y) {
    if (!is_scalar_op(*add, "aten::add.Scalar", 3) || add->input(0) != y ||
        !same_layout(add->output()->type(), y->type())) {
      return nullptr;
    }
    Node* low = sole(add->output(), "aten::clamp");
    Node* high = low ? sole(low->output(), "aten::clamp") : nullptr;
    if (!high || !is_one_sided_clamp(*low, 0.0, std::nullopt) ||
        !is_one_sided_clamp(*high, std::nullopt, 6.0)) {
      return nullptr;
    }
    return high;
  }

  /// SiLU (x * sigmoid(x), or aten::silu), sigmoid, hardswish (x * clamp(clamp(x + 3, 0), max=6)
  /// / 6, or aten::hardswish) or hardsigmoid (clamp(clamp(x + 3, 0), max=6) / 6, or
  /// aten::hardsigmoid) reading `y` and nothing else reading what it computes on the way.
  std::optional<Activation> activation_after(Value* y) {
    for (const auto& [op, name] : {std::pair{"aten::silu", "silu"},
                                   {"aten::sigmoid", "sigmoid"},
                                   {"aten::hardswish", "hardswish"},
                                   {"aten::hardsigmoid", "hardsigmoid"}}) {
      if (Node* whole = sole(y, op)) return Activation{name, {whole}, whole->output()};
    }
    const auto& readers = users(y);
    // relu6(x + 3) / 6: the add alone reads y.
    if (readers.size() == 1 && readers[0]) {
      Node* high = relu6_of_plus_3(readers[0], y);
      Node* divide = high ? sole(high->output(), "aten::div.Scalar") : nullptr;
      if (!divide || !is_scalar_op(*divide, "aten::div.Scalar", 6)) return std::nullopt;
      return Activation{
          "hardsigmoid", {readers[0], high->input(0)->producer(), high, divide}, divide->output()};
    }
    if (readers.size() != 2 || !readers[0] || !readers[1]) return std::nullopt;
    // x * sigmoid(x): the sigmoid and the product read y.
    for (int first : {0, 1}) {
      Node* sigmoid = readers[first];
      Node* product = readers[1 - first];
      if (sigmoid->op() == "aten::sigmoid" &&
          sole(sigmoid->output(), "aten::mul.Tensor") == product && product->inputs().size() == 2 &&
          same_layout(product->output()->type(), y->type())) {
        return Activation{"silu", {sigmoid, product}, product->output()};
      }
    }
    // x * relu6(x + 3) / 6: the add and the product read y.
    for (int first : {0, 1}) {
      Node* add = readers[first];
      Node* product = readers[1 - first];
      Node* high = relu6_of_plus_3(add, y);
      if (!high || sole(high->output(), "aten::mul.Tensor") != product) continue;
      Node* low = high->input(0)->producer();
      Node* divide = sole(product->output(), "aten::div.Scalar");
      if (!divide || !is_scalar_op(*divide, "aten::div.Scalar", 6)) continue;
      return Activation{"hardswish", {add, low, high, product, divide}, divide->output()};
    }
    return std::nullopt;
  }

  const bool bf16_;
  std::unordered_map<const Value*, int> readers_;
  std::unordered_map<const Value*, std::vector<Node*>> users_;
};

}  // namespace

int onednn_conv(ir::Graph& graph, bool bf16) {
  return OneDnnConvRewriter(graph, bf16).run();
}

bool is_onednn_conv(const ir::Node& node) {
  return node.op() == "kiln::onednn_conv2d" || node.op() == "kiln::onednn_conv3d";
}

std::optional<size_t> conv_residual_input(const ir::Node& conv) {
  if (!is_onednn_conv(conv) || is_none(conv.find_attr("other"))) return std::nullopt;
  const size_t at = is_none(conv.find_attr("bias")) ? 3 : 4;
  if (at >= conv.inputs().size()) return std::nullopt;
  return at;
}

std::vector<std::pair<int, int>> conv_in_place_candidates(const ir::Node& conv) {
  const std::optional<size_t> other = conv_residual_input(conv);
  if (!other || conv.outputs().size() != 1) return {};
  const ir::TensorType& residual = conv.input(*other)->type();
  const ir::TensorType& output = conv.output()->type();
  // oneDNN reads and writes the one buffer in the output's layout and type.
  if (residual.sizes != output.sizes || residual.strides != output.strides ||
      residual.dtype != output.dtype) {
    return {};
  }
  return {{static_cast<int>(*other), 0}};
}

}  // namespace kiln
