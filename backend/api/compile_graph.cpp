#include "backend/api/compile_graph.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <chrono>

#include "backend/api/code_generators.h"
#include "backend/api/environment.h"
#include "backend/api/explain_plan.h"
#include "backend/api/graph_cache.h"
#include "backend/api/precision.h"
#include "backend/api/run_node.h"
#include "backend/api/shared_constants.h"
#include "kiln/error.h"
#include "passes/pipeline.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/plan_builder.h"

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/code_bundle.h"
#endif

namespace kiln {
namespace {

// prepack_linear's and prepack_conv's ops: ATen built with oneDNN, and every op registered.
bool has_onednn_ops() {
  static const bool available = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    return at::hasMKLDNN() && dispatcher.findSchema({"mkldnn::_linear_pointwise", ""}) &&
           dispatcher.findSchema({"mkldnn::_reorder_linear_weight", ""}) &&
           dispatcher.findSchema({"mkldnn::_convolution_pointwise", ""}) &&
           dispatcher.findSchema({"mkldnn::_convolution_pointwise", "binary"}) &&
           dispatcher.findSchema({"aten::to_mkldnn", ""}) &&
           dispatcher.findSchema({"aten::mkldnn_reorder_conv2d_weight", ""}) &&
           dispatcher.findSchema({"aten::mkldnn_reorder_conv3d_weight", ""});
  }();
  return available;
}

// onednn_conv's and prepack_linear's: registered where kiln was built with its own oneDNN
// (cmake/OneDNN.cmake).
bool has_own_onednn() {
  static const bool available = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    return dispatcher.findSchema({"kiln::onednn_conv2d", ""}) &&
           dispatcher.findSchema({"kiln::onednn_conv2d", "out"}) &&
           dispatcher.findSchema({"kiln::onednn_conv2d_weight", ""}) &&
           dispatcher.findSchema({"kiln::onednn_conv3d", ""}) &&
           dispatcher.findSchema({"kiln::onednn_conv3d", "out"}) &&
           dispatcher.findSchema({"kiln::onednn_conv3d_weight", ""}) &&
           dispatcher.findSchema({"kiln::onednn_linear", ""}) &&
           dispatcher.findSchema({"kiln::onednn_linear", "out"}) &&
           dispatcher.findSchema({"kiln::onednn_linear_weight", ""}) &&
           dispatcher.findSchema({"kiln::onednn_matmul", ""}) &&
           dispatcher.findSchema({"kiln::onednn_matmul", "out"});
  }();
  return available;
}

}  // namespace

codegen::CodegenRequest codegen_request(c10::Device device, const std::string& dump_prefix) {
  codegen::CodegenRequest request;
  request.dump_prefix = dump_prefix;
  request.device_index = device.has_index() ? device.index() : 0;
  request.compile_threads = at::get_num_threads();
  request.reuse_kernels = !disabled_names().contains("kernel_cache");
#ifdef KILN_HAVE_LLVM
  // A package's compiles must make the same code modules in every process, so that their keys
  // find the package's code: grouped as when it was saved, none shared with other plans.
  if (const jit::CodeBundle* bundle = jit::code_bundle_in_use()) {
    request.compile_threads = bundle->grouping_threads();
    request.reuse_kernels = false;
  }
#endif
  request.one_pass_moments = !disabled_names().contains("one_pass_moments");
  return request;
}

namespace {

// The graph passes' result: the optimized graph and its constants taken from the graph cache
// (graph_cache.h) where they are kept, else made by the passes and kept.
PipelineResult graph_passes(std::unique_ptr<ir::Graph>& graph, std::vector<at::Tensor>& constants,
                            const PipelineOptions& pipeline, CompiledRegion& compiled) {
  const auto start = std::chrono::steady_clock::now();
  const DebugClock clock(pipeline.dump_name + ": graph cache");
  compiled.graph_key = graph_key(*graph, constants, pipeline);
  clock.step("key");
  if (!compiled.graph_key.empty()) {
    std::optional<CachedGraph> cached = load_graph(compiled.graph_key);
    clock.step(cached ? "loaded" : "missed");
    if (cached) {
      graph = std::move(cached->graph);
      constants = std::move(cached->constants);
      for (at::Tensor& constant : constants)
        constant = share_folded_constant(std::move(constant));
      compiled.graph_loaded = true;
      PipelineResult result;
      result.layout_conversions = cached->layout_conversions;
      return result;
    }
  }
  PipelineResult result = run_pipeline(*graph, pipeline, PipelinePart::GraphPasses);
  if (!compiled.graph_key.empty()) {
    const double pass_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    store_graph(compiled.graph_key, *graph, constants, result.layout_conversions, pass_seconds);
    clock.step("stored");
  }
  return result;
}

// A tensor of `type`'s dtype and sizes whose values nobody reads: what a fold passes an op that
// reads its input's type alone (kTypeOnlyInput). One element, expanded: the input may be a large
// activation (`x.new_zeros(...)` of a video clip), and the result takes the node's strides anyway.
at::Tensor stand_in(const ir::TensorType& type, c10::Device device) {
  return at::empty({}, at::TensorOptions().dtype(to_aten_dtype(type.dtype)).device(device))
      .expand(type.sizes);
}

}  // namespace

PipelineOptions pipeline_options(c10::Device device, const CompileOptions& options,
                                 const std::string& name, bool plan_memory,
                                 std::vector<at::Tensor>& all_constants) {
  const Environment& env = environment();
  PipelineOptions pipeline;
  pipeline.dump_dir = options.dump_dir.empty() ? env.dump_dir : options.dump_dir;
  pipeline.dump_name = name;
  pipeline.verify = env.verify;
  pipeline.disabled = disabled_names();
  // out= variants do not record autograd history: plan memory only when none is needed.
  if (plan_memory) pipeline.can_write_into_buffer = can_write_into_buffer;
  // oneDNN's linear records no autograd history either.
  pipeline.prepack_onednn = plan_memory && device.is_cpu() && has_onednn_ops();
  pipeline.own_onednn = pipeline.prepack_onednn && has_own_onednn();
  // Only kiln's own oneDNN primitives multiply in bf16 (a graph that needs autograd has none,
  // and precision=bf16 refuses it before this).
  pipeline.bf16 = multiplies_in_bf16(options, device.is_cpu()) && pipeline.own_onednn;
  const codegen::CodeGenerator* generator = code_generator_for(device);
  pipeline.fusion = options.fusion && generator;
  pipeline.strict = options.strict;
  if (generator) {
    pipeline.reduction_pieces = [generator](const kernel::Kernel& kernel) {
      return generator->reduction_pieces(kernel);
    };
  }
  if (auto ir_device = to_ir_device(device)) pipeline.device = *ir_device;
  // Weights computed at compile time (folded batch norms, ...) join the constants, shared with
  // earlier compiles that folded the same bytes (shared_constants.h).
  pipeline.evaluate_constant = [&all_constants, device, name](
                                   const ir::Node& node,
                                   const std::vector<int64_t>& indices) -> std::optional<int64_t> {
    std::vector<at::Tensor> inputs;
    try {
      for (size_t k = 0; k < indices.size(); ++k) {
        inputs.push_back(indices[k] == kTypeOnlyInput ? stand_in(node.input(k)->type(), device)
                                                      : all_constants.at(indices[k]));
      }
      all_constants.push_back(share_folded_constant(evaluate_node(node, inputs, device), inputs));
    } catch (const std::exception& e) {
      log(LogLevel::Debug, name + ": not folding " + node.op() + ": " + e.what());
      return std::nullopt;
    }
    return static_cast<int64_t>(all_constants.size()) - 1;
  };
  if (device.is_cpu()) {
    pipeline.infer_types = [device](const ir::Node& node,
                                    const std::vector<ir::TensorType>& types) {
      return infer_types(node, types, device);
    };
  }
  return pipeline;
}

std::shared_ptr<CompiledRegion> compile_graph(std::unique_ptr<ir::Graph> graph,
                                              const std::vector<at::Tensor>& constants,
                                              c10::Device device, const CompileOptions& options,
                                              const std::string& name, bool plan_memory) {
  const auto start = std::chrono::steady_clock::now();
  const Environment& env = environment();
  std::vector<at::Tensor> all_constants = constants;
  PipelineOptions pipeline = pipeline_options(device, options, name, plan_memory, all_constants);
  const codegen::CodeGenerator* generator = code_generator_for(device);
  // Kept to start over without fusion if code generation fails.
  std::unique_ptr<ir::Graph> unfused = pipeline.fusion ? graph->clone() : nullptr;
  auto compiled = std::make_shared<CompiledRegion>();
  PipelineResult result;
  if (pipeline.dump_dir.empty()) {
    const PipelineResult graph_result = graph_passes(graph, all_constants, pipeline, *compiled);
    result =
        run_pipeline(*graph, pipeline, PipelinePart::KernelPasses, graph_result.layout_conversions);
  } else {
    // Dumps show every pass: a dumped graph is never taken from the graph cache.
    result = run_pipeline(*graph, pipeline);
  }
  for (const std::string& why : result.unfused)
    log(LogLevel::Warn, name + ": a fusion group runs op by op: " + why);

  codegen::GeneratedKernels generated;
  if (!result.kernels.empty()) {
    const std::string dump_prefix = pipeline.dump_dir.empty() ? "" : pipeline.dump_dir + "/" + name;
    try {
      generated = generator->compile(result.kernels, codegen_request(device, dump_prefix));
      compiled->codegen_seconds = generated.compile_seconds;
      compiled->reused_kernels = generated.reused;
      compiled->modules = generated.modules;
      compiled->modules_loaded = generated.modules_loaded;
    } catch (const Error& e) {
      // Code generation failed: this specialization runs op by op through ATen instead.
      if (options.strict) throw;
      log(LogLevel::Warn, name + ": code generation failed, running without fusion: " + e.what());
      graph = std::move(unfused);
      all_constants = constants;  // the unfused graph's indices are the imported constants'
      pipeline.fusion = false;
      result = run_pipeline(*graph, pipeline);
    }
  }
  const auto plan_start = std::chrono::steady_clock::now();
  compiled->plan =
      build_plan(*graph, all_constants, result.memory, device, generated.kernels, generated.code);
  if (env.log_level >= LogLevel::Debug) {
    auto ms = [](auto from, auto to) {
      return std::to_string(std::chrono::duration<double, std::milli>(to - from).count());
    };
    log(LogLevel::Debug, name + ": code generation took " +
                             std::to_string(compiled->codegen_seconds * 1e3) + " ms, the plan " +
                             ms(plan_start, std::chrono::steady_clock::now()) + " ms");
  }
  compiled->plan.layout_conversions = result.layout_conversions;
  compiled->entries = explain_graph(*graph, result.memory);
  for (const ir::Node* node : graph->nodes())
    compiled->kernels += node->op() == ir::kFusedOp;
  compiled->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

}  // namespace kiln
