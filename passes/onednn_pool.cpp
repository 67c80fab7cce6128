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
    return node.op() == "aten::max_pool2d" && node.inputs().size() == 1 &&
           node.outputs().size() == 1 && is_pooled_feature_map(node.input(0)->type());
  }

  bool rewrite(Node& pool) override {
    const auto kernel = two(pool, "kernel_size");
    if (!kernel) return false;
    const auto stride = two(pool, "stride", *kernel);
    const auto padding = two(pool, "padding");
    const auto dilation = two(pool, "dilation");
    const auto* ceil_mode = std::get_if<bool>(pool.find_attr("ceil_mode"));
    if (!stride || !padding || !dilation || !ceil_mode) return false;
    ir::Value* pooled = add("kiln::onednn_max_pool2d", {pool.input(0)}, pool.output()->type(),
                            {{"kernel_size", *kernel},
                             {"stride", *stride},
                             {"padding", *padding},
                             {"dilation", *dilation},
                             {"ceil_mode", *ceil_mode}});
    replace_with_added(pool, pooled);
    return true;
  }
};

}  // namespace

int onednn_pool(ir::Graph& graph) {
  return OneDnnPoolRewriter(graph).run();
}

}  // namespace kiln
