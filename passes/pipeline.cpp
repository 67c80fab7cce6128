#include "passes/pipeline.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <variant>

#include "kiln/error.h"
#include "passes/base/environment.h"
#include "passes/bf16_activations.h"
#include "passes/canonicalize.h"
#include "passes/conv_as_linear.h"
#include "passes/decompose_batch_norm.h"
#include "passes/decompose_group_norm.h"
#include "passes/eliminate_common_subexpressions.h"
#include "passes/eliminate_dead_code.h"
#include "passes/fold_batch_norm.h"
#include "passes/fuse_elementwise.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_reductions.h"
#include "passes/fusion_clusters.h"
#include "passes/ir/printer.h"
#include "passes/ir/verifier.h"
#include "passes/kernel/in_place.h"
#include "passes/kernel/lower_group.h"
#include "passes/merge_conv_branches.h"
#include "passes/onednn_conv.h"
#include "passes/onednn_pool.h"
#include "passes/prepack_conv.h"
#include "passes/prepack_linear.h"
#include "passes/recognize_attention.h"
#include "passes/recognize_gelu.h"
#include "passes/split_reductions.h"
#include "passes/winograd_conv.h"

namespace kiln {
namespace {

class PassRunner {
 public:
  PassRunner(ir::Graph& graph, const PipelineOptions& options, PipelineResult& result)
      : graph_(graph), options_(options), result_(result) {
    dump("capture");
  }

  /// Runs `pass` unless disabled (by its name or by its family's), then dumps and verifies.
  template <typename Pass>
  void run(const std::string& name, const std::string& family, Pass pass) {
    if (options_.disabled.count(name) || options_.disabled.count(family)) return;
    const auto start = std::chrono::steady_clock::now();
    pass();
    // Where a compile's time goes, pass by pass (KILN_LOG=debug).
    if (environment().log_level >= LogLevel::Debug) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      char text[32];
      std::snprintf(text, sizeof text, "%.1f ms", ms);
      log(LogLevel::Debug, options_.dump_name + ": " + name + " took " + text);
    }
    result_.passes_run.push_back(name);
    dump(name);
    if (options_.verify) ir::check_graph(graph_, name);
  }

 private:
  void dump(const std::string& name) {
    if (options_.dump_dir.empty()) return;
    std::filesystem::create_directories(options_.dump_dir);
    char index[8];
    std::snprintf(index, sizeof index, "%02d", step_++);
    std::ofstream(std::filesystem::path(options_.dump_dir) /
                  (options_.dump_name + "." + index + "-" + name + ".kir"))
        << ir::print_graph(graph_);
  }

  ir::Graph& graph_;
  const PipelineOptions& options_;
  PipelineResult& result_;
  int step_ = 0;
};

// Lowers each fusion group to a kernel; a group the lowering rejects goes back to single ops
// (a fuser bug must cost speed, never correctness).
/// Devices match where their kinds do and, when both name one, their indices (-1 is the current
/// device of that kind).
bool same_device(const ir::Device& a, const ir::Device& b) {
  return a.kind == b.kind && (a.index < 0 || b.index < 0 || a.index == b.index);
}

void lower_kernels(ir::Graph& graph, const PipelineOptions& options, PipelineResult& result) {
  std::vector<std::pair<ir::Node*, std::string>> failed;
  for (ir::Node* node : graph.nodes()) {
    if (node->op() != kFusedOp) continue;
    // The fusers keep a group on one device (runs_on_one_device); the plan's kernels run on its.
    const ir::Device group_device = node->output()->type().device;
    if (!same_device(group_device, options.device)) {
      failed.emplace_back(node, "its tensors are on " + ir::device_name(group_device) +
                                    ", and this plan's kernels run on " +
                                    ir::device_name(options.device));
      result.unfused.push_back(failed.back().second);
      continue;
    }
    const std::string name = options.dump_name + "_k" + std::to_string(result.kernels.size());
    try {
      result.kernels.push_back(kernel::lower_group(*node->subgraph(), name));
      node->set_attr("kernel", static_cast<int64_t>(result.kernels.size() - 1));
    } catch (const std::exception& e) {
      // The lowering states what it does not support (ErrorKind::Unsupported); anything else
      // thrown inside it is a bug, which strict raises and which is otherwise logged as one
      // (the group still runs op by op through ATen, so the model runs).
      const auto* error = dynamic_cast<const Error*>(&e);
      if (!error || error->kind() != ErrorKind::Unsupported) {
        const std::string why = "lowering " + name + " failed: " + e.what();
        if (options.strict) throw Error(ErrorKind::Internal, why);
        log(LogLevel::Error, "kiln bug: " + why +
                                 "; its group runs op by op through ATen (results are unaffected; "
                                 "please report it with the graph KILN_DUMP_DIR writes)");
      }
      result.unfused.push_back(e.what());
      failed.emplace_back(node, e.what());
    }
  }
  for (const auto& [node, why] : failed)
    inline_fused_node(graph, node, why);
}

std::optional<int64_t> kernel_index(const ir::Node& node) {
  if (node.op() != kFusedOp) return std::nullopt;
  const auto* index = std::get_if<int64_t>(node.find_attr("kernel"));
  return index ? std::optional<int64_t>(*index) : std::nullopt;
}

/// In node terms (input index, output index): a fused node's buffers are its inputs, then its
/// outputs, in order. A oneDNN convolution may write over its residual (conv_in_place_candidates).
std::vector<std::pair<int, int>> in_place_candidates(const ir::Node& node,
                                                     const std::vector<kernel::Kernel>& kernels) {
  std::vector<std::pair<int, int>> pairs;
  const auto index = kernel_index(node);
  if (!index) return conv_in_place_candidates(node);
  const kernel::Kernel& k = kernels.at(*index);
  if (k.num_inputs() != static_cast<int>(node.inputs().size())) return pairs;
  for (const auto& [in, out] : kernel::in_place_candidates(k))
    pairs.emplace_back(in, out - k.num_inputs());
  return pairs;
}

}  // namespace

const std::vector<std::string>& pipeline_pass_names() {
  static const std::vector<std::string> names = {
      "canonicalize",        "recognize_gelu",       "fold_batch_norm",
      "merge_conv_branches", "decompose_batch_norm", "decompose_group_norm",
      "assign_layout",       "conv_as_linear",       "prepack_linear",
      "prepack_conv",        "winograd_conv",        "onednn_conv",
      "onednn_pool",         "recognize_attention",  "bf16_activations",
      "fold_constants",      "eliminate_dead_code",  "eliminate_common_subexpressions",
      "fuse_reductions",     "fuse_epilogue",        "fuse_elementwise",
      "lower_kernels",       "split_reductions",     "plan_memory"};
  return names;
}

namespace {

void run_graph_passes(ir::Graph& graph, const PipelineOptions& options, PipelineResult& result,
                      PassRunner& passes) {
  passes.run("canonicalize", "", [&] { canonicalize(graph); });
  // Before prepack_linear, which makes a GELU after a linear the linear's post-op.
  passes.run("recognize_gelu", "", [&] { recognize_gelu(graph); });
  // Batch-norm folding writes the new weights as ops on constants, and layout assignment the
  // channels-last copies of frozen convolution weights; fold_constants computes them.
  if (options.evaluate_constant) {
    passes.run("fold_batch_norm", "", [&] { fold_batch_norm(graph); });
    // With the batch norms in their weights, convolutions of one input summed are one.
    passes.run("merge_conv_branches", "", [&] { merge_conv_branches(graph); });
    // The batch norms left become a multiply and an add per channel, which pays only where the
    // fusers then join them with their neighbours.
    if (options.fusion) {
      passes.run("decompose_batch_norm", "fusion", [&] { decompose_batch_norm(graph); });
    }
  }
  // Its statistics become sibling reductions and its normalization elementwise ops: worth it
  // only where they fuse.
  if (options.fusion && options.device.kind == ir::DeviceKind::CPU) {
    passes.run("decompose_group_norm", "fusion", [&] { decompose_group_norm(graph); });
  }
  if (options.infer_types) {
    passes.run("assign_layout", "",
               [&] { result.layout_conversions = assign_layout(graph, options.infer_types); });
  }
  // After batch-norm folding (which gives weights new values) and layout assignment (oneDNN's
  // convolutions take channels-last inputs); fold_constants packs the weights.
  if (options.prepack_onednn && options.evaluate_constant) {
    const bool bf16 = options.bf16 && options.own_onednn;
    // One-pixel convolutions become linears first, for prepack_linear and the kernel generator.
    passes.run("conv_as_linear", "", [&] { conv_as_linear(graph); });
    passes.run("prepack_linear", "", [&] { prepack_linear(graph, options.own_onednn, bf16); });
    passes.run("prepack_conv", "", [&] {
      prepack_conv(graph, options.own_onednn && !options.disabled.contains("onednn_conv"));
    });
    // On prepack_conv's oneDNN convolutions: the 3x3 ones where Winograd is measured to win (in
    // float32: not where they are to multiply in bf16).
    if (!bf16) passes.run("winograd_conv", "", [&] { winograd_conv(graph); });
    // The rest on primitives kiln keeps, not ATen's op that creates one every call.
    if (options.own_onednn) passes.run("onednn_conv", "", [&] { onednn_conv(graph, bf16); });
    if (options.own_onednn) passes.run("onednn_pool", "", [&] { onednn_pool(graph); });
    // Between those that multiply in bf16, their activations in bf16, and attention written out
    // as ATen's fused one first, so that it can multiply in bf16 too.
    if (bf16 && options.own_onednn) {
      passes.run("recognize_attention", "", [&] { recognize_attention(graph); });
      passes.run("bf16_activations", "", [&] { bf16_activations(graph); });
    }
  }
  if (options.evaluate_constant) {
    passes.run("fold_constants", "", [&] { fold_constants(graph, options.evaluate_constant); });
  }
  passes.run("eliminate_dead_code", "", [&] { eliminate_dead_code(graph); });
  passes.run("eliminate_common_subexpressions", "",
             [&] { eliminate_common_subexpressions(graph); });
}

void run_kernel_passes(ir::Graph& graph, const PipelineOptions& options, PipelineResult& result,
                       PassRunner& passes) {
  // Reductions first, so they can take their producers; then GEMM/conv epilogues; then the
  // remaining elementwise ops.
  if (options.fusion) {
    passes.run("fuse_reductions", "fusion", [&] { fuse_reductions(graph); });
    passes.run("fuse_epilogue", "fusion", [&] { fuse_epilogue(graph); });
    passes.run("fuse_elementwise", "fusion", [&] { fuse_elementwise(graph); });
    passes.run("lower_kernels", "fusion", [&] { lower_kernels(graph, options, result); });
    if (options.reduction_pieces) {
      passes.run("split_reductions", "fusion",
                 [&] { split_reductions(result.kernels, options.reduction_pieces); });
    }
  }
  passes.run("plan_memory", "",
             [&] { result.memory = plan_kernel_memory(graph, options, result.kernels); });
}

}  // namespace

MemoryPlan plan_kernel_memory(const ir::Graph& graph, const PipelineOptions& options,
                              std::vector<kernel::Kernel>& kernels) {
  auto can_write = options.can_write_into_buffer ? options.can_write_into_buffer
                                                 : [](const ir::Node&) { return false; };
  MemoryPlan memory = plan_memory(
      graph, can_write, [&](const ir::Node& node) { return in_place_candidates(node, kernels); });
  // The kernels learn which of their buffers now share memory, so codegen keeps them ordered.
  for (const InPlaceWrite& write : memory.in_place) {
    const auto index = kernel_index(*write.node);
    if (!index) continue;  // a convolution adding into its residual
    kernel::Kernel& k = kernels.at(*index);
    k.in_place.emplace_back(write.input, k.num_inputs() + write.output);
  }
  return memory;
}

PipelineResult run_pipeline(ir::Graph& graph, const PipelineOptions& options, PipelinePart part,
                            int layout_conversions) {
  PipelineResult result;
  result.layout_conversions = layout_conversions;
  if (options.verify) ir::check_graph(graph, "capture");
  PassRunner passes(graph, options, result);
  if (part != PipelinePart::KernelPasses) run_graph_passes(graph, options, result, passes);
  if (part != PipelinePart::GraphPasses) run_kernel_passes(graph, options, result, passes);
  return result;
}

}  // namespace kiln
