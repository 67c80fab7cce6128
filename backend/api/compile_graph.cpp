#include "backend/api/compile_graph.h"

#ifndef KILN_HAVE_LLVM
#define KILN_HAVE_LLVM 0
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <chrono>
#include <mutex>

#include "backend/api/environment.h"
#include "backend/codegen/cuda/compile_cuda_kernels.h"
#if KILN_HAVE_LLVM
#include "backend/codegen/llvm/compile_kernels.h"
#endif
#include "kiln/error.h"
#include "passes/fusion_clusters.h"
#include "passes/ir/op_table.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "passes/kernel/lower_ops.h"
#include "passes/pipeline.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/executor.h"
#include "runtime/plan_builder.h"

namespace kiln {
namespace {

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
    entries.push_back({member->op(), "fused kernel", why});
}

/// Whether kiln generates kernels for `device` (else every op runs through ATen there).
bool generates_code_for(c10::Device device) {
  if (device.is_cpu()) return KILN_HAVE_LLVM && !disabled_names().contains("llvm");
  if (!device.is_cuda() || disabled_names().contains("cuda")) return false;
  static const std::string why_not = codegen::cuda::cuda_codegen_unavailable_reason();
  if (!why_not.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      log(LogLevel::Warn, "no CUDA code generation, CUDA ops run through ATen: " + why_not);
    });
  }
  return why_not.empty();
}

/// The plan's kernels compiled for `device`: JIT'd CPU functions or CUDA kernels.
std::vector<KernelBinding> generate_kernels(const std::vector<kernel::Kernel>& kernels,
                                            c10::Device device, const std::string& dump_prefix,
                                            std::shared_ptr<void>& code,
                                            CompiledRegion& compiled_region) {
  std::vector<KernelBinding> bindings;
  if (device.is_cuda()) {
    codegen::cuda::CudaCodegenOptions options;
    options.device = device.has_index() ? device.index() : 0;
    options.dump_prefix = dump_prefix;
    auto compiled = codegen::cuda::compile_cuda_kernels(kernels, options);
    for (auto& k : compiled.kernels)
      bindings.emplace_back().device_kernel = std::move(k);
    compiled_region.codegen_seconds = compiled.compile_seconds;
    return bindings;
  }
#if KILN_HAVE_LLVM
  codegen::CodegenOptions options;
  options.dump_prefix = dump_prefix;
  options.reuse_kernels = !disabled_names().contains("kernel_cache");
  options.one_pass_moments = !disabled_names().contains("one_pass_moments");
  options.split_reductions = !disabled_names().contains("split_reductions");
  options.compile_threads = at::get_num_threads();
  codegen::CompiledKernels compiled = codegen::compile_kernels(kernels, options);
  for (const auto& k : compiled.kernels) {
    KernelBinding& binding = bindings.emplace_back();
    binding.function = k.function;
    binding.range = k.launch.range;
    binding.grain = k.launch.grain;
    binding.finish = k.finish;
  }
  code = compiled.code;
  compiled_region.codegen_seconds = compiled.compile_seconds;
  compiled_region.reused_kernels = compiled.reused;
#endif
  return bindings;
}

ExplainEntry explain_node(const ir::Node& node, const MemoryPlan& memory) {
  ExplainEntry entry{node.op(), "extern ATen", ""};
  if (const ir::OpInfo* info = ir::find_op(node.op())) {
    if (node.op() == "mkldnn::_linear_pointwise") {
      entry.why = "gemm: oneDNN's matmul on a weight prepacked at compile time";
    } else if (node.op().starts_with("mkldnn::_convolution_pointwise")) {
      entry.why = "convolution: oneDNN's, on a weight prepacked at compile time";
      if (node.find_attr("binary_attr")) entry.why += ", with its residual add inside";
      for (const char* name : {"attr", "unary_attr"}) {
        const auto* post = std::get_if<std::string>(node.find_attr(name));
        if (post && *post != "none") entry.why += ", with its " + *post + " inside";
      }
    } else if (node.op() == "kiln::winograd_conv2d") {
      entry.why = "convolution: Winograd F(4x4, 3x3), its filter transformed at compile time";
      if (!node.find_attr("other")) entry.why += ", with its residual add inside";
      const auto* activation = std::get_if<std::string>(node.find_attr("activation"));
      if (activation && *activation != "none") entry.why += ", with its " + *activation + " inside";
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

// Runs `node` alone (a one-node plan through ATen) on `inputs`, typed `types` in its graph.
std::vector<at::Tensor> run_node_alone(const ir::Node& node,
                                       const std::vector<ir::TensorType>& types,
                                       const std::vector<at::Tensor>& inputs, c10::Device device) {
  ir::Graph graph;
  std::vector<ir::Value*> values;
  for (const ir::TensorType& type : types)
    values.push_back(graph.add_input(type));
  std::vector<ir::TensorType> output_types;
  for (const ir::Value* out : node.outputs())
    output_types.push_back(out->type());
  for (ir::Value* out : graph.append(node.op(), values, output_types, node.attrs())->outputs())
    graph.add_output(out);
  at::NoGradGuard no_grad;
  return run_plan(build_plan(graph, {}, MemoryPlan{}, device), inputs);
}

// fold_constants' evaluator: the node on constant tensors.
at::Tensor evaluate_node(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                         c10::Device device) {
  std::vector<ir::TensorType> types;
  for (const ir::Value* in : node.inputs())
    types.push_back(in->type());
  at::Tensor result = run_node_alone(node, types, inputs, device).at(0);
  // A weight in oneDNN's opaque layout (prepack_linear) has no strides; its type keeps the
  // dense sizes and only oneDNN's ops read it.
  if (result.is_mkldnn()) return result;
  // The constant must have exactly the type the graph gave the node.
  const ir::TensorType& type = node.output()->type();
  if (result.sizes().vec() != type.sizes || result.strides().vec() != type.strides) {
    result = at::empty_strided(type.sizes, type.strides, result.options()).copy_(result);
  }
  return result;
}

// assign_layout's type inference: the node run once on zeros on the device. Not on meta
// tensors: the meta convolution returns a contiguous output for a channels-last input, where
// oneDNN's returns channels-last, and the types must be what the ops really return.
std::optional<std::vector<ir::TensorType>> infer_types(const ir::Node& node,
                                                       const std::vector<ir::TensorType>& types,
                                                       c10::Device device) {
  try {
    std::vector<at::Tensor> zeros;
    for (const ir::TensorType& t : types) {
      auto options = at::TensorOptions().dtype(to_aten_dtype(t.dtype)).device(device);
      zeros.push_back(at::empty_strided(t.sizes, t.strides, options).zero_());
    }
    std::vector<ir::TensorType> result;
    for (const at::Tensor& t : run_node_alone(node, types, zeros, device)) {
      ir::TensorType type = node.output(result.size())->type();
      type.sizes = t.sizes().vec();
      type.strides = t.strides().vec();
      type.dtype = to_ir_dtype(t.scalar_type()).value_or(type.dtype);
      result.push_back(std::move(type));
    }
    return result;
  } catch (const std::exception& e) {
    log(LogLevel::Debug, "layout: cannot run " + node.op() + " on new strides: " + e.what());
  }
  return std::nullopt;
}

// prepack_linear's and prepack_conv's ops: ATen built with oneDNN, and every op registered.
bool has_onednn_ops() {
  static const bool available = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    return at::hasMKLDNN() && dispatcher.findSchema({"mkldnn::_linear_pointwise", ""}) &&
           dispatcher.findSchema({"mkldnn::_reorder_linear_weight", ""}) &&
           dispatcher.findSchema({"mkldnn::_convolution_pointwise", ""}) &&
           dispatcher.findSchema({"mkldnn::_convolution_pointwise", "binary"}) &&
           dispatcher.findSchema({"aten::to_mkldnn", ""}) &&
           dispatcher.findSchema({"aten::mkldnn_reorder_conv2d_weight", ""});
  }();
  return available;
}

}  // namespace

std::shared_ptr<CompiledRegion> compile_graph(std::unique_ptr<ir::Graph> graph,
                                              const std::vector<at::Tensor>& constants,
                                              c10::Device device, const CompileOptions& options,
                                              const std::string& name, bool plan_memory) {
  const auto start = std::chrono::steady_clock::now();
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
  pipeline.fusion = options.fusion && generates_code_for(device);
  if (auto ir_device = to_ir_device(device)) pipeline.device = *ir_device;
  // Weights computed at compile time (folded batch norms, ...) join the constants.
  std::vector<at::Tensor> all_constants = constants;
  pipeline.evaluate_constant = [&](const ir::Node& node,
                                   const std::vector<int64_t>& indices) -> std::optional<int64_t> {
    std::vector<at::Tensor> inputs;
    for (int64_t i : indices)
      inputs.push_back(all_constants.at(i));
    try {
      all_constants.push_back(evaluate_node(node, inputs, device));
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
  // Kept to start over without fusion if code generation fails.
  std::unique_ptr<ir::Graph> unfused = pipeline.fusion ? graph->clone() : nullptr;
  PipelineResult result = run_pipeline(*graph, pipeline);
  for (const std::string& why : result.unfused)
    log(LogLevel::Warn, name + ": a fusion group runs op by op: " + why);

  auto compiled = std::make_shared<CompiledRegion>();
  std::vector<KernelBinding> bindings;
  std::shared_ptr<void> code;
  if (!result.kernels.empty()) {
    const std::string dump_prefix = pipeline.dump_dir.empty() ? "" : pipeline.dump_dir + "/" + name;
    try {
      bindings = generate_kernels(result.kernels, device, dump_prefix, code, *compiled);
    } catch (const Error& e) {
      // Code generation failed: this specialization runs op by op through ATen instead.
      if (options.strict) throw;
      log(LogLevel::Warn, name + ": code generation failed, running without fusion: " + e.what());
      graph = std::move(unfused);
      pipeline.fusion = false;
      result = run_pipeline(*graph, pipeline);
    }
  }
  compiled->plan = build_plan(*graph, all_constants, result.memory, device, bindings, code);
  compiled->plan.layout_conversions = result.layout_conversions;
  for (const ir::Node* node : graph->nodes()) {
    if (node->op() == ir::kFusedOp) {
      explain_fused(*node, compiled->entries);
      ++compiled->kernels;
    } else if (node->op() != ir::kConstantOp) {
      compiled->entries.push_back(explain_node(*node, result.memory));
    }
  }
  compiled->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

}  // namespace kiln
