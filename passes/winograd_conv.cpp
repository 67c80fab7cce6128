#include "passes/winograd_conv.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/fold_constants.h"
#include "passes/kernel/size_decisions.h"
#include "passes/node_rewriter.h"
#include "passes/prepack_conv.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr int64_t kPoints = 36;                  // F(4x4, 3x3): 6x6 transformed points
constexpr int64_t kTile = 4;                     // output tile side
constexpr int64_t kMinChannels = 64;             // fewer: the transforms cost more than they save
constexpr int64_t kMaxFloats = 4 * 1024 * 1024;  // 16 MB: half the L3 it was measured on
constexpr int64_t kMinTiles = 64;                // to amortize a transformed filter past 4 MB

bool ints_are(const Node& node, const char* name, const std::vector<int64_t>& expected) {
  const auto* list = std::get_if<std::vector<int64_t>>(node.find_attr(name));
  return list && *list == expected;
}

const std::string* string_attr(const Node& node, const char* name) {
  return std::get_if<std::string>(node.find_attr(name));
}

/// The post-op of a oneDNN convolution as winograd_conv2d's activation ("none" or "relu"), or
/// null when it has another (hardtanh) or a binary op other than add.
const char* activation_of(const Node& conv) {
  if (conv.op() == "mkldnn::_convolution_pointwise") {
    const std::string* attr = string_attr(conv, "attr");
    if (!attr) return nullptr;
    if (*attr == "none") return "none";
    if (*attr == "relu") return "relu";
    return nullptr;
  }
  const std::string* binary = string_attr(conv, "binary_attr");
  if (!binary || *binary != "add" || !is_none(conv.find_attr("alpha"))) return nullptr;
  if (is_none(conv.find_attr("unary_attr"))) return "none";
  const std::string* unary = string_attr(conv, "unary_attr");
  return unary && *unary == "relu" ? "relu" : nullptr;
}

/// Whether F(4x4, 3x3) is measured to beat oneDNN's direct convolution for these sizes: the
/// transforms cost per tile and channel, the GEMMs save per channel pair, so narrow convolutions
/// need their transformed tiles to stay in cache (half the limit below 128 channels); and a
/// transformed filter past 4 MB (ResNet's 256-channel ones are 9 MB) comes from memory on every
/// call, which pays only over enough tiles (a batch of 8 at 14x14 has 128).
///
/// The tiles are counted as outputs over 16 (N H W / 16, a polynomial of the sizes: a shape
/// class keeps these decisions as guards, and over image sizes a tile count rounded up follows no
/// term); a map whose sides are not multiples of 4 has a few more.
bool wins(const std::vector<int64_t>& input, int64_t out_channels) {
  const int64_t channels = input[1];
  const int64_t narrowest = std::min(channels, out_channels);
  const int64_t outputs = input[0] * input[2] * input[3];
  const int64_t filter = kPoints * channels * out_channels;
  if (narrowest < kMinChannels) return false;
  const int64_t tile = kTile * kTile;
  const bool filter_pays =
      filter <= kMaxFloats / 4 ||
      (filter <= kMaxFloats && kernel::at_least(outputs, kMinTiles * tile,
                                                "a convolution's outputs, to amortize Winograd's "
                                                "filter over their tiles"));
  const int64_t tile_limit = narrowest >= 2 * kMinChannels ? kMaxFloats : kMaxFloats / 2;
  return filter_pays &&
         kernel::at_most(kPoints * outputs * (channels + out_channels), tile_limit * tile,
                         "a convolution's transformed tiles, to take Winograd's");
}

}  // namespace

bool winograd_takes(const ir::Node& conv, const ir::Value& weight) {
  if (!ints_are(conv, "padding", {1, 1}) || !ints_are(conv, "stride", {1, 1}) ||
      !ints_are(conv, "dilation", {1, 1})) {
    return false;
  }
  const auto* groups = std::get_if<int64_t>(conv.find_attr("groups"));
  const ir::TensorType& w = weight.type();
  const std::vector<int64_t>& x = conv.input(0)->type().sizes;
  return groups && *groups == 1 && w.rank() == 4 && w.sizes[2] == 3 && w.sizes[3] == 3 &&
         w.dtype == ir::DType::Float32 && x.size() == 4 && w.sizes[1] == x[1] &&
         wins(x, w.sizes[0]);
}

namespace {

class WinogradRewriter : public NodeRewriter {
 public:
  explicit WinogradRewriter(ir::Graph& graph)
      : NodeRewriter(graph), readers_(ir::count_uses(graph)) {}

 private:
  bool applies(const Node& node) const override {
    return node.op() == "mkldnn::_convolution_pointwise" ||
           node.op() == "mkldnn::_convolution_pointwise.binary";
  }

  bool rewrite(Node& conv) override {
    const bool binary = conv.op() == "mkldnn::_convolution_pointwise.binary";
    const char* activation = activation_of(conv);
    if (!activation) return false;
    // Inputs: x, [other,] packed weight[, bias]; a missing bias is the attr B=None.
    const size_t weight_at = binary ? 2 : 1;
    if (conv.inputs().size() <= weight_at) return false;
    Value* packed = conv.input(weight_at);
    Value* weight = prepacked_dense_weight(*packed);
    if (!weight || !winograd_takes(conv, *weight)) return false;
    const ir::TensorType& w = weight->type();

    ir::TensorType transformed = w;
    transformed.sizes = {kPoints, w.sizes[1], w.sizes[0]};
    transformed.strides = {w.sizes[1] * w.sizes[0], w.sizes[0], 1};
    Node* filter = graph_.append("kiln::winograd_weight", {weight}, {transformed}, {});
    filter->output()->set_name(weight->name() + "_winograd");

    // The dense filter stays too: inputs with NaN or infinities are convolved directly.
    std::vector<Value*> inputs = {conv.input(0), weight, filter->output()};
    ir::AttrList attrs;
    const bool has_bias = conv.inputs().size() > weight_at + 1;
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
    attrs.emplace_back("activation", std::string(activation));
    Node* winograd = graph_.append("kiln::winograd_conv2d", std::move(inputs),
                                   {conv.output()->type()}, std::move(attrs));
    winograd->output()->set_name(conv.output()->name());
    graph_.move_before(filter, &conv);
    graph_.move_before(winograd, &conv);
    graph_.replace_all_uses(conv.output(), winograd->output());
    removed_.insert(&conv);
    release_packed_weight(*packed, readers_, removed_);
    return true;
  }

  std::unordered_map<const Value*, int> readers_;
};

}  // namespace

int winograd_conv(ir::Graph& graph) {
  return WinogradRewriter(graph).run();
}

}  // namespace kiln
