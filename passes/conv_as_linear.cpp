#include "passes/conv_as_linear.h"

#include <algorithm>
#include <variant>
#include <vector>

#include "passes/fold_constants.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

bool is_cpu_float32(const TensorType& type) {
  return type.dtype == ir::DType::Float32 && type.device.kind == ir::DeviceKind::CPU;
}

// A 2-D convolution without padding, in one group, of a frozen float32 [O, C, 1, 1] weight over
// a float32 [N, C, 1, 1] input: each output is a dot product of the input's channels with a row
// of the weight (stride and dilation do not matter over one pixel).
bool sees_one_pixel(const Node& node) {
  if (!is_forward_conv(node)) return false;
  const auto* groups = std::get_if<int64_t>(node.find_attr("groups"));
  const auto* padding = int_list_attr(node, "padding");
  if (!groups || *groups != 1 || !padding ||
      std::any_of(padding->begin(), padding->end(), [](int64_t p) { return p != 0; })) {
    return false;
  }
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
  return node.inputs().size() < 3 ||
         (is_cpu_float32(node.input(2)->type()) && node.input(2)->type().rank() == 1);
}

/// `type` without its two trailing dims of size 1: every other stride kept, so always a view.
TensorType rows_of(TensorType type) {
  type.sizes.resize(2);
  type.strides.resize(2);
  return type;
}

class ConvAsLinear : public NodeRewriter {
 public:
  using NodeRewriter::NodeRewriter;

 private:
  bool applies(const Node& node) const override { return sees_one_pixel(node); }

  bool rewrite(Node& conv) override {
    std::vector<Value*> inputs = {view(conv.input(0), rows_of(conv.input(0)->type()), "_rows"),
                                  view(conv.input(1), rows_of(conv.input(1)->type()), "_rows")};
    ir::AttrList attrs;
    if (conv.inputs().size() > 2) {
      inputs.push_back(conv.input(2));
    } else {
      attrs.emplace_back("bias", ir::NoneAttr{});
    }
    const TensorType& type = conv.output()->type();
    Value* product = add("aten::linear", std::move(inputs),
                         with_sizes(type, {type.sizes[0], type.sizes[1]}), std::move(attrs));
    if (!conv.output()->name().empty()) product->set_name(conv.output()->name() + "_rows");
    // Back to the convolution's own type: its strides on the two size-1 dims are whatever its
    // layout said; the data is the same.
    replace_with_added(conv, view(product, type, ""));
    return true;
  }

  Value* view(Value* value, TensorType type, const char* suffix) {
    std::vector<int64_t> sizes = type.sizes;
    Value* viewed = add("aten::view", {value}, type, {{"size", std::move(sizes)}});
    if (!value->name().empty()) viewed->set_name(value->name() + suffix);
    return viewed;
  }
};

}  // namespace

int conv_as_linear(ir::Graph& graph) {
  return ConvAsLinear(graph).run();
}

}  // namespace kiln
