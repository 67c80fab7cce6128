// From a graph in the IR to a runnable plan: the pass pipeline (fusion, memory planning), code
// generation for the fused kernels, and the plan. Both frontends end here; so do the fuzzer's
// random graphs. No TorchScript headers, only ATen's.
#pragma once

#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/codegen/code_generator.h"
#include "kiln/explain.h"
#include "kiln/options.h"
#include "passes/ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"

namespace kiln {

struct CompiledRegion {
  Plan plan;
  std::vector<ExplainEntry> entries;
  double compile_seconds = 0;  // all of it: import, passes, code generation, plan
  double codegen_seconds = 0;  // LLVM: IR, optimization, machine code
  int kernels = 0;             // generated kernels
  int reused_kernels = 0;      // of those, taken from code compiled for earlier plans
  int modules = 0;             // code modules made for the rest
  int modules_loaded = 0;      // of those, loaded (disk cache or a package), not compiled
  /// The key its optimized graph is kept under (graph_cache.h; empty: not kept), and whether it
  /// was taken from there rather than made by the graph passes.
  std::string graph_key;
  bool graph_loaded = false;
};

/// `constants[i]` is the tensor of `prim::Constant {index=i}`; `device` is where the inputs
/// live. `plan_memory`: intermediates may go into a shared arena (not when autograd records the
/// calls: out= variants do not). If code generation fails the graph runs op by op through ATen
/// (with a warning; with options.strict the error is thrown).
std::shared_ptr<CompiledRegion> compile_graph(std::unique_ptr<ir::Graph> graph,
                                              const std::vector<at::Tensor>& constants,
                                              c10::Device device, const CompileOptions& options,
                                              const std::string& name, bool plan_memory);

/// The pipeline's options for a graph compiled on `device` (what compile_graph runs it with).
/// Constants the passes fold are appended to `all_constants`, which must outlive the options.
PipelineOptions pipeline_options(c10::Device device, const CompileOptions& options,
                                 const std::string& name, bool plan_memory,
                                 std::vector<at::Tensor>& all_constants);

/// What the code generator is asked for besides the kernels (`dump_prefix`: empty, or where
/// to write the kernels, their IR and assembly).
codegen::CodegenRequest codegen_request(c10::Device device, const std::string& dump_prefix);

}  // namespace kiln
