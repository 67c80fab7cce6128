// The pass pipeline: the one place where pass order is written.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "passes/assign_layout.h"
#include "passes/fold_constants.h"
#include "passes/ir/graph.h"
#include "passes/kernel/kernel.h"
#include "passes/plan_memory.h"

namespace kiln {

struct PipelineOptions {
  /// Where the graph IR is written after each pass ("" = nowhere); files are
  /// `<dump_dir>/<dump_name>.<NN>-<pass>.kir`.
  std::string dump_dir;
  std::string dump_name = "graph";
  /// Run the verifier after every pass (KILN_VERIFY).
  bool verify = false;
  /// Names of passes to skip (KILN_DISABLE), e.g. "eliminate_dead_code", "plan_memory"; "fusion"
  /// skips the three fusers, the two norm decompositions and lower_kernels.
  std::set<std::string> disabled;
  /// The `fusion` compile option: false skips the fusers.
  bool fusion = true;
  /// The `strict` compile option: a lowering that fails for a reason other than an unsupported
  /// case (a bug) raises instead of leaving its group to ATen.
  bool strict = false;
  /// Computes nodes on frozen constants at compile time (the runtime's); without it neither
  /// fold_batch_norm nor fold_constants runs.
  ConstantEvaluator evaluate_constant;
  /// Output types of a node for other input types (the runtime's meta run); without it
  /// assign_layout does not run.
  TypeInferrer infer_types;
  /// prepack_linear and prepack_conv run: the runtime has oneDNN's ops and no autograd is needed.
  bool prepack_onednn = false;
  /// The runtime has kiln's own oneDNN primitives (kiln::onednn_conv2d, kiln::onednn_linear):
  /// prepack_linear's linears and prepack_conv's convolutions run on them (onednn_conv).
  bool own_onednn = false;
  /// The `precision=bf16` compile option, where the CPU multiplies bf16 natively: the linears and
  /// convolutions on kiln's own oneDNN primitives multiply in bf16 (their `precision` attribute),
  /// and winograd_conv, which multiplies in float32, does not run.
  bool bf16 = false;
  /// Where the plan runs, and so its generated kernels: a fusion group whose tensors are on
  /// another device (a region that moves values with `.to()`) runs op by op through ATen.
  /// decompose_group_norm runs only on the CPU: on CUDA kiln's reduction kernels walk a row once
  /// per reduction, and whether the decomposed norm beats ATen's there has not been measured on a
  /// GPU.
  ir::Device device;
  /// Into how many pieces the target splits a full reduction (the code generator's
  /// reduction_pieces); without it split_reductions does not run.
  std::function<int64_t(const kernel::Kernel&)> reduction_pieces;
  /// Which nodes the runtime can make write into a planned buffer.
  std::function<bool(const ir::Node&)> can_write_into_buffer;
};

struct PipelineResult {
  MemoryPlan memory;
  /// One kernel per kiln::fused node, whose attribute `kernel` is its index here.
  std::vector<kernel::Kernel> kernels;
  /// Groups that could not be lowered were inlined back: why, for explain and logs.
  std::vector<std::string> unfused;
  std::vector<std::string> passes_run;
  /// Layout conversions assign_layout inserted (0 when it did not change the graph).
  int layout_conversions = 0;
};

/// The names of all passes, in pipeline order.
const std::vector<std::string>& pipeline_pass_names();

/// Which passes run_pipeline runs: all of them, or the two halves a cached graph splits them
/// into (backend/api/graph_cache.h). The graph passes (canonicalize to
/// eliminate_common_subexpressions) rewrite the graph and fold its constants, and are most of a
/// compile's pass time; the kernel passes (the fusers to plan_memory) make kernels and the memory
/// plan, in a few milliseconds.
enum class PipelinePart { Whole, GraphPasses, KernelPasses };

/// For KernelPasses, `layout_conversions` is the one GraphPasses' result had (it is carried
/// into the result).
PipelineResult run_pipeline(ir::Graph& graph, const PipelineOptions& options,
                            PipelinePart part = PipelinePart::Whole, int layout_conversions = 0);

/// The plan_memory pass alone: the memory plan of a graph whose fused nodes' kernels are
/// `kernels` (an instantiated shape class's), each of which learns which of its buffers share
/// memory (Kernel::in_place).
MemoryPlan plan_kernel_memory(const ir::Graph& graph, const PipelineOptions& options,
                              std::vector<kernel::Kernel>& kernels);

}  // namespace kiln
