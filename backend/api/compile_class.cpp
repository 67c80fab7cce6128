#include "backend/api/compile_class.h"

#include <ATen/ATen.h>

#include <chrono>

#include "backend/api/code_generators.h"
#include "backend/api/explain_plan.h"
#include "kiln/error.h"
#include "passes/ir/printer.h"
#include "passes/kernel/size_terms.h"
#include "runtime/plan_builder.h"

namespace kiln {
namespace {

[[noreturn]] void no_class(const std::string& why) {
  throw Error(ErrorKind::Unsupported, "no shape class: " + why);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Whether the passes folded the same constants at both bindings (the imported weights are the
/// same tensors; a folded one must hold the same values).
bool same_constants(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].unsafeGetTensorImpl() == b[i].unsafeGetTensorImpl()) continue;
    if (a[i].sizes() != b[i].sizes() || a[i].strides() != b[i].strides() ||
        a[i].scalar_type() != b[i].scalar_type() || !at::equal(a[i], b[i]))
      return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const CompiledClass> compile_class(std::vector<ImportedGraph> imports,
                                                   const kernel::Bindings& bindings,
                                                   ImportedGraph check,
                                                   std::span<const int64_t> check_binding,
                                                   const CompileOptions& options,
                                                   const std::string& name, bool plan_memory) {
  const auto start = std::chrono::steady_clock::now();
  auto result = std::make_shared<CompiledClass>();
  result->options = options;
  result->name = name;
  result->plan_memory = plan_memory;
  result->device = imports.at(0).device;
  if (!result->device.is_cpu()) no_class("the CUDA code generator has no size-generic kernels");
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  std::vector<std::vector<kernel::Kernel>> kernels;
  imports.push_back(std::move(check));  // last: run as the others, fitted by none
  for (size_t j = 0; j < imports.size(); ++j) {
    std::vector<at::Tensor> constants = imports[j].constants;
    const PipelineOptions pipeline =
        pipeline_options(result->device, options, name, plan_memory, constants);
    PipelineResult passes = run_pipeline(*imports[j].graph, pipeline);
    if (j == 0) {
      result->constants = std::move(constants);
      result->layout_conversions = passes.layout_conversions;
    } else if (!same_constants(result->constants, constants)) {
      no_class("the passes fold a constant that depends on the sizes");
    }
    graphs.push_back(std::move(imports[j].graph));
    kernels.push_back(std::move(passes.kernels));
  }
  const std::unique_ptr<ir::Graph> checked = std::move(graphs.back());
  const std::vector<kernel::Kernel> checked_kernels = std::move(kernels.back());
  graphs.pop_back();
  kernels.pop_back();
  std::vector<const ir::Graph*> views;
  for (const auto& g : graphs)
    views.push_back(g.get());
  std::string why_not;
  std::optional<GraphTemplate> graph = generalize_graph(views, bindings, why_not);
  if (!graph) no_class(why_not);
  result->graph = std::move(*graph);
  // A decision the fitted bindings agree on can still turn elsewhere (a size clamped at a
  // bound one of them crossed): the check binding must come out as the template says.
  if (ir::print_graph(*instantiate(result->graph, check_binding)) !=
      ir::print_graph(*checked->clone()))
    no_class("the graph at a further binding is not what the fitted one gives there");
  for (size_t k = 0; k < kernels[0].size(); ++k) {
    std::vector<kernel::Kernel> lowered;
    for (const auto& at_binding : kernels)
      lowered.push_back(at_binding.at(k));
    kernel::Generalized generic = kernel::generalize(lowered, bindings);
    if (!generic.kernel) no_class("kernel " + lowered[0].name + ": " + generic.why_not);
    const kernel::Kernel bound = kernel::bind_sizes(*generic.kernel, check_binding);
    if (k >= checked_kernels.size() ||
        !kernel::same_computation(kernel::without_terms(bound), checked_kernels[k]))
      no_class("kernel " + lowered[0].name + " at a further binding is not the fitted one");
    result->kernels.push_back(std::move(*generic.kernel));
  }
  if (!result->kernels.empty()) {
    const codegen::CodeGenerator* generator = code_generator_for(result->device);
    codegen::GeneratedKernels generated =
        generator->compile(result->kernels, codegen_request(result->device, ""));
    result->compiled = std::move(generated.kernels);
    result->code = std::move(generated.code);
    result->codegen_seconds = generated.compile_seconds;
  }
  result->compile_seconds = seconds_since(start);
  return result;
}

std::shared_ptr<CompiledRegion> instantiate_class(const CompiledClass& compiled,
                                                  std::span<const int64_t> sizes) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ir::Graph> graph = instantiate(compiled.graph, sizes);
  std::vector<at::Tensor> constants = compiled.constants;
  const PipelineOptions pipeline = pipeline_options(compiled.device, compiled.options,
                                                    compiled.name, compiled.plan_memory, constants);
  std::vector<kernel::Kernel> kernels = compiled.kernels;
  for (kernel::Kernel& k : kernels)
    k.in_place.clear();
  const MemoryPlan memory = plan_kernel_memory(*graph, pipeline, kernels);
  std::vector<CompiledKernel> bound = compiled.compiled;
  for (size_t k = 0; k < kernels.size(); ++k) {
    // The code was made knowing which buffers share memory: this plan must share the same.
    if (kernels[k].in_place != compiled.kernels[k].in_place)
      throw Error(ErrorKind::Unsupported,
                  "no shape class: at these sizes kernel " + kernels[k].name +
                      " would write other buffers in place than it was compiled for");
    CompiledKernel& c = bound[k];
    if (!c.launch_at) continue;  // nothing in it varies with the sizes
    const KernelLaunch launch = c.launch_at(sizes.data());
    c.range = launch.range;
    c.grain = launch.grain;
    c.size_values.assign(sizes.begin(), sizes.end());
    c.launch_at = nullptr;
  }
  auto region = std::make_shared<CompiledRegion>();
  region->plan = build_plan(*graph, constants, memory, compiled.device, bound, compiled.code);
  region->plan.layout_conversions = compiled.layout_conversions;
  region->entries = explain_graph(*graph, memory);
  region->kernels = static_cast<int>(kernels.size());
  region->compile_seconds = seconds_since(start);
  return region;
}

}  // namespace kiln
