#include "runtime/step_label.h"

#include <string>
#include <variant>

#include "passes/ir/op_table.h"

namespace kiln {
namespace {

// A copy that only changes how the data is laid out: channels-last in and out (assign_layout's
// `_to_copy` with a memory format), oneDNN's blocked layout in and out.
bool converts_layout(const ir::Node& node) {
  const std::string& op = node.op();
  if (op == "aten::to_mkldnn" || op == "aten::to_dense" || op == "aten::contiguous") return true;
  if (op != "aten::_to_copy") return false;
  const ir::Attr* format = node.find_attr("memory_format");
  return format && std::holds_alternative<int64_t>(*format);
}

// The class of one node; `layout` before the op table, which files such copies under `copy`, and
// `attention` for fused attention ops (ATen's scaled_dot_product_* kernels), not in the table.
std::string category_of(const ir::Node& node) {
  if (converts_layout(node)) return "layout";
  const std::string& op = node.op();
  if (op.find("scaled_dot_product") != std::string::npos ||
      op.find("attention") != std::string::npos)
    return "attention";
  const ir::OpInfo* info = ir::find_op(node.op());
  return info ? ir::op_kind_name(info->kind) : "other";
}

// Which class names a kernel that mixes several: the one whose work dominates a kernel's time.
int weight_of(const std::string& category) {
  static const char* const order[] = {"layout",      "view",     "copy",          "elementwise",
                                      "reduction",   "pooling",  "normalization", "gemm",
                                      "convolution", "attention"};
  for (int i = 0; i < static_cast<int>(std::size(order)); ++i)
    if (category == order[i]) return i;
  return -1;
}

// The sizes of `node`'s first input and first output.
void add_sizes(const ir::Node& node, StepLabel& label) {
  if (!node.inputs().empty()) label.input_sizes = node.input(0)->type().sizes;
  if (!node.outputs().empty()) label.output_sizes = node.outputs()[0]->type().sizes;
}

}  // namespace

StepLabel label_extern_node(const ir::Node& node) {
  StepLabel label{category_of(node), "", {}, {}};
  add_sizes(node, label);
  return label;
}

StepLabel label_fused_node(const ir::Node& node) {
  StepLabel label{"layout", "", {}, {}};
  add_sizes(node, label);
  for (const ir::Node* member : node.subgraph()->nodes()) {
    if (member->op() == ir::kConstantOp) continue;
    if (!label.ops.empty()) label.ops += " + ";
    label.ops += member->op();
    const std::string category = category_of(*member);
    if (weight_of(category) > weight_of(label.category)) label.category = category;
  }
  return label;
}

}  // namespace kiln
