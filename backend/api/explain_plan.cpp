#include "backend/api/explain_plan.h"

#include <string>
#include <variant>

#include "passes/fusion_clusters.h"
#include "passes/ir/op_table.h"
#include "passes/kernel/lower_ops.h"
#include "passes/onednn_conv.h"

namespace kiln {
namespace {

/// ", reading its weight as bf16" for a linear in a kernel whose weight prepack_linear rounded
/// (precision=bf16); "" otherwise.
std::string weight_precision_note(const ir::Node& node) {
  const bool rounded = node.op() == "aten::linear" && node.inputs().size() > 1 &&
                       node.input(1)->type().dtype == ir::DType::BFloat16 &&
                       node.output()->type().dtype == ir::DType::Float32;
  return rounded ? ", reading its weight as bf16" : "";
}

void explain_fused(const ir::Node& node, std::vector<ExplainEntry>& entries) {
  const auto* index = std::get_if<int64_t>(node.find_attr("kernel"));
  std::string why = "kernel " + std::to_string(index ? *index : -1) + " (" +
                    std::to_string(node.subgraph()->num_nodes()) + " ops)";
  if (const auto* of = std::get_if<std::string>(node.find_attr("epilogue"))) {
    why += ", epilogue of " + *of;
  } else if (const auto* of = std::get_if<std::string>(node.find_attr("reduction"))) {
    why += ", around " + *of;
  }
  for (const ir::Node* member : node.subgraph()->nodes())
    entries.push_back({member->op(), RunsIn::FusedKernel, why + weight_precision_note(*member)});
}

/// ", multiplying in bf16" for a kiln oneDNN step under precision=bf16 (and ", writing bf16"
/// where its output is a bf16 activation); "" otherwise.
std::string precision_note(const ir::Node& node) {
  const auto* precision = std::get_if<std::string>(node.find_attr("precision"));
  if (!precision || *precision != "bf16") return "";
  const auto* output = std::get_if<std::string>(node.find_attr("out_precision"));
  return output && *output == "bf16" ? ", multiplying in bf16, writing bf16"
                                     : ", multiplying in bf16";
}

/// ", with its relu inside" for a kiln oneDNN product with an activation post-op; "" otherwise.
std::string activation_note(const ir::Node& node) {
  const auto* activation = std::get_if<std::string>(node.find_attr("activation"));
  return activation && *activation != "none" ? ", with its " + *activation + " inside" : "";
}

ExplainEntry explain_node(const ir::Node& node, const MemoryPlan& memory) {
  ExplainEntry entry{node.op(), RunsIn::ExternAten, ""};
  if (const ir::OpInfo* info = ir::find_op(node.op())) {
    if (node.op() == "mkldnn::_linear_pointwise") {
      entry.why = "gemm: oneDNN's matmul on a weight prepacked at compile time";
    } else if (node.op() == "kiln::onednn_linear") {
      entry.why =
          "gemm: kiln's oneDNN matmul primitive, made once, on a weight packed at compile "
          "time" +
          activation_note(node) + precision_note(node);
    } else if (node.op() == "kiln::onednn_matmul") {
      entry.why = "gemm: kiln's oneDNN matmul primitive, made once, on operands as they lie" +
                  activation_note(node);
    } else if (node.op().starts_with("mkldnn::_convolution_pointwise")) {
      entry.why = "convolution: oneDNN's, on a weight prepacked at compile time";
      if (node.find_attr("binary_attr")) entry.why += ", with its residual add inside";
      for (const char* name : {"attr", "unary_attr"}) {
        const auto* post = std::get_if<std::string>(node.find_attr(name));
        if (post && *post != "none") entry.why += ", with its " + *post + " inside";
      }
    } else if (node.op() == "kiln::winograd_conv2d" || is_onednn_conv(node)) {
      entry.why = node.op() == "kiln::winograd_conv2d"
                      ? "convolution: Winograd F(4x4, 3x3), its filter transformed at compile time"
                      : "convolution: kiln's oneDNN primitive, made once, on a weight packed at "
                        "compile time";
      if (!node.find_attr("other")) entry.why += ", with its residual add inside";
      const auto* activation = std::get_if<std::string>(node.find_attr("activation"));
      if (activation && *activation != "none") entry.why += ", with its " + *activation + " inside";
      entry.why += precision_note(node);
    } else if (node.op() == "kiln::onednn_max_pool2d" || node.op() == "kiln::onednn_avg_pool2d") {
      entry.why = node.op() == "kiln::onednn_max_pool2d"
                      ? "pooling: kiln's oneDNN max pool, made once"
                      : "pooling: kiln's oneDNN average pool, made once";
      if (node.output()->type().dtype == ir::DType::BFloat16) entry.why += ", in bf16";
    } else if (info->kind == ir::OpKind::Gemm || info->kind == ir::OpKind::Convolution) {
      entry.why = std::string(ir::op_kind_name(info->kind)) + ": ATen's BLAS/oneDNN kernel";
    } else if (const auto* why = std::get_if<std::string>(node.find_attr(kUnfusedAttr))) {
      entry.why = "its fusion group could not be lowered to a kernel: " + *why;
    } else if (kernel::can_lower(node)) {
      entry.why = "fusible, but fusion is off for this compile";
    } else {
      entry.why = std::string("in the op table (") + ir::op_kind_name(info->kind) +
                  "), but kiln generates no kernel for this op with these attributes and dtypes";
    }
  } else {
    entry.why = "not in kiln's op table; called through ATen's dispatcher";
  }
  if (node.outputs().size() == 1 && memory.is_planned(node.output())) {
    entry.why += "; writes into the memory plan";
  }
  return entry;
}

}  // namespace

std::vector<ExplainEntry> explain_graph(const ir::Graph& graph, const MemoryPlan& memory) {
  std::vector<ExplainEntry> entries;
  for (const ir::Node* node : graph.nodes()) {
    if (node->op() == ir::kFusedOp) {
      explain_fused(*node, entries);
    } else if (node->op() != ir::kConstantOp) {
      entries.push_back(explain_node(*node, memory));
    }
  }
  return entries;
}

}  // namespace kiln
