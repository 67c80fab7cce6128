#include "passes/onednn_pool.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;

/// A pooling argument as two values: [a, b] as it is, [a] as [a, a], [] as `empty` (a stride
/// left out means the kernel size); nothing for any other length or kind.
std::optional<std::vector<int64_t>> two(const Node& node, const char* name,
                                        const std::vector<int64_t>& empty = {}) {
  const auto* values = int_list_attr(node, name);
  if (!values) return std::nullopt;
  if (values->size() == 2) return *values;
  if (values->size() == 1) return std::vector<int64_t>{(*values)[0], (*values)[0]};
  if (values->empty() && empty.size() == 2) return empty;
  return std::nullopt;
}

bool is_pooled_feature_map(const ir::TensorType& type) {
  return type.rank() == 4 && type.device.kind == ir::DeviceKind::CPU &&
         (type.dtype == ir::DType::Float32 || type.dtype == ir::DType::BFloat16);
}

class OneDnnPoolRewriter : public NodeRewriter {
 public:
  using NodeRewriter::NodeRewriter;

 private:
  bool applies(const Node& node) const override {
    return (node.op() == "aten::max_pool2d" || node.op() == "aten::avg_pool2d") &&
           node.inputs().size() == 1 && node.outputs().size() == 1 &&
           is_pooled_feature_map(node.input(0)->type());
  }

  bool rewrite(Node& pool) override {
    const bool average = pool.op() == "aten::avg_pool2d";
    const auto kernel = two(pool, "kernel_size");
    if (!kernel) return false;
    const auto stride = two(pool, "stride", *kernel);
    const auto padding = two(pool, "padding");
    const auto* ceil_mode = std::get_if<bool>(pool.find_attr("ceil_mode"));
    if (!stride || !padding || !ceil_mode) return false;
    ir::AttrList attrs = {{"kernel_size", *kernel}, {"stride", *stride}, {"padding", *padding}};
    if (average) {
      // A divisor_override divides every window by one number: ATen's alone.
      const auto* include = std::get_if<bool>(pool.find_attr("count_include_pad"));
      if (!include || !is_none(pool.find_attr("divisor_override"))) return false;
      attrs.emplace_back("ceil_mode", *ceil_mode);
      attrs.emplace_back("count_include_pad", *include);
    } else {
      const auto dilation = two(pool, "dilation");
      if (!dilation) return false;
      attrs.emplace_back("dilation", *dilation);
      attrs.emplace_back("ceil_mode", *ceil_mode);
    }
    ir::Value* pooled = add(average ? "kiln::onednn_avg_pool2d" : "kiln::onednn_max_pool2d",
                            {pool.input(0)}, pool.output()->type(), std::move(attrs));
    replace_with_added(pool, pooled);
    return true;
  }
};

}  // namespace

int onednn_pool(ir::Graph& graph) {
  return OneDnnPoolRewriter(graph).run();
}

}  // namespace kiln
