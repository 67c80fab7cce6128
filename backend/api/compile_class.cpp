#include "backend/api/compile_class.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>

#include "backend/api/class_constants.h"
#include "backend/api/code_generators.h"
#include "backend/api/explain_plan.h"
#include "kiln/error.h"
#include "passes/ir/printer.h"
#include "passes/kernel/size_decisions.h"
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

/// The guards of the decisions the pipeline made at each binding (`decisions[j]` at
/// `bindings[j]`, the check binding last, as kernel::with_check lays them out): the same
/// decisions, in the same order, with the same outcomes at every binding, each value (and what
/// it is less) a term of the sizes. Values that do not move need no guard.
std::vector<DecisionGuard> decision_guards(
    const std::vector<std::vector<kernel::SizeDecision>>& decisions,
    const kernel::Bindings& bindings) {
  const auto& base = decisions.at(0);
  for (const auto& at_binding : decisions) {
    if (at_binding.size() != base.size())
      no_class("the passes make " + std::to_string(base.size()) + " and " +
               std::to_string(at_binding.size()) + " size decisions at two bindings");
  }
  // A side of the comparison: its term (a constant where it does not move).
  auto side = [&](const std::vector<int64_t>& values, const char* what) {
    if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; }))
      return kernel::SizeTerm{values[0], {}};
    const std::optional<kernel::SizeTerm> term = kernel::fit_term(values, bindings);
    if (!term)
      no_class(std::string("a size decision's value follows no term of the sizes: ") + what);
    return *term;
  };
  std::vector<DecisionGuard> guards;
  for (size_t i = 0; i < base.size(); ++i) {
    std::vector<int64_t> values, less;
    for (const auto& at_binding : decisions) {
      const kernel::SizeDecision& d = at_binding[i];
      if (d.threshold != base[i].threshold || d.outcome != base[i].outcome ||
          std::string(d.what) != base[i].what)
        no_class(std::string("the passes decide otherwise at two bindings: ") + base[i].what);
      values.push_back(d.value);
      less.push_back(d.less);
    }
    DecisionGuard guard{side(values, base[i].what), base[i].threshold, base[i].outcome,
                        base[i].what, side(less, base[i].what)};
    if (guard.value.factors.empty() && guard.less.factors.empty()) continue;  // no move
    const bool seen = std::any_of(guards.begin(), guards.end(), [&](const DecisionGuard& g) {
      return g.value == guard.value && g.less == guard.less && g.threshold == guard.threshold &&
             g.outcome == guard.outcome;
    });
    if (!seen) guards.push_back(std::move(guard));
  }
  return guards;
}

bool holds(const DecisionGuard& g, std::span<const int64_t> sizes) {
  return (kernel::evaluate(g.value, sizes) - kernel::evaluate(g.less, sizes) >= g.threshold) ==
         g.outcome;
}

bool schedule_holds(const CompiledKernel& k, std::span<const int64_t> sizes) {
  return !k.schedule_holds || k.schedule_holds(sizes.data());
}

/// The imported graphs (`imports[j]` at `bindings[j]`, then `check` at the check binding, as
/// kernel::with_check lays them out) as one template: every size the graph computes (shapes,
/// and size arithmetic such as a view's `H // 4`) a term of the sizes. Throws Unsupported where
/// it is not.
GraphTemplate fit_imports(const std::vector<ImportedGraph>& imports, const ir::Graph& check,
                          const kernel::Bindings& bindings) {
  std::vector<const ir::Graph*> views;
  for (const ImportedGraph& at_binding : imports)
    views.push_back(at_binding.graph.get());
  views.push_back(&check);
  std::string why_not;
  std::optional<GraphTemplate> fitted = generalize_graph(views, bindings, why_not);
  if (!fitted) no_class("its import: " + why_not);
  return std::move(*fitted);
}

}  // namespace

ClassBindings class_bindings(std::span<const int64_t> base) {
  ClassBindings result;
  result.fitted.emplace_back(base.begin(), base.end());
  result.check.assign(base.begin(), base.end());
  for (size_t i = 0; i < base.size(); ++i) {
    result.fitted.emplace_back(base.begin(), base.end());
    result.fitted.back()[i] += 1;
    result.check[i] += 2;
  }
  return result;
}

std::string import_difference(const CompiledClass& compiled, const ir::Graph& imported,
                              std::span<const int64_t> sizes) {
  return template_difference(compiled.imported, imported, sizes);
}

bool guards_hold(const CompiledClass& compiled, std::span<const int64_t> sizes) {
  // The passes' decisions first (a few integer operations), then the kernels' schedules.
  return std::all_of(compiled.guards.begin(), compiled.guards.end(),
                     [&](const DecisionGuard& g) { return holds(g, sizes); }) &&
         std::all_of(compiled.compiled.begin(), compiled.compiled.end(),
                     [&](const CompiledKernel& k) { return schedule_holds(k, sizes); });
}

size_t guards_failing(const CompiledClass& compiled, std::span<const int64_t> sizes) {
  return std::count_if(compiled.guards.begin(), compiled.guards.end(),
                       [&](const DecisionGuard& g) { return !holds(g, sizes); }) +
         std::count_if(compiled.compiled.begin(), compiled.compiled.end(),
                       [&](const CompiledKernel& k) { return !schedule_holds(k, sizes); });
}

std::string guard_failure(const CompiledClass& compiled, std::span<const int64_t> sizes) {
  for (const DecisionGuard& g : compiled.guards) {
    if (holds(g, sizes)) continue;
    const std::string threshold = std::to_string(g.threshold);
    return g.what + ": " + std::to_string(kernel::evaluate(g.value, sizes)) +
           (g.outcome ? " < " : " >= ") + threshold + " at these sizes, " +
           (g.outcome ? ">= " : "< ") + threshold + " where the class was compiled";
  }
  for (size_t k = 0; k < compiled.compiled.size(); ++k) {
    if (!schedule_holds(compiled.compiled[k], sizes))
      return "kernel " + compiled.kernels[k].name +
             ": the schedule its code follows is not the one these sizes would choose";
  }
  return "";
}

std::shared_ptr<const CompiledClass> compile_class(
    std::vector<ImportedGraph> imports, const kernel::Bindings& bindings, ImportedGraph check,
    std::span<const int64_t> check_binding, const CompileOptions& options, const std::string& name,
    bool plan_memory, const std::vector<std::vector<int64_t>>& dims) {
  const auto start = std::chrono::steady_clock::now();
  auto result = std::make_shared<CompiledClass>();
  result->options = options;
  result->name = name;
  result->plan_memory = plan_memory;
  result->device = imports.at(0).device;
  std::vector<std::unique_ptr<ir::Graph>> graphs;
  std::vector<std::vector<kernel::Kernel>> kernels;
  std::vector<std::vector<at::Tensor>> constants_at;
  std::vector<std::vector<kernel::SizeDecision>> decisions;
  // The check binding is fitted with the others: every term must give its integers too (it
  // chooses between terms that fit the rest alike), and its structure must be theirs. A decision
  // the fitted bindings agree on can still turn elsewhere (a size clamped at a bound one of them
  // crossed): the check catches what turns within two steps.
  const kernel::Bindings checked_bindings = kernel::with_check(bindings, check_binding);
  // The imports themselves first (the passes change them in place).
  result->imported = fit_imports(imports, *check.graph, checked_bindings);
  imports.push_back(std::move(check));  // last: run as the others, fitted by none
  std::vector<const ir::Graph*> imported;
  for (const ImportedGraph& at_binding : imports)
    imported.push_back(at_binding.graph.get());
  const std::vector<std::vector<int64_t>> moving = moving_integers(result->imported, imported);
  const std::vector<int64_t> staying = staying_integers(result->imported);
  for (size_t j = 0; j < imports.size(); ++j) {
    std::vector<at::Tensor> constants = imports[j].constants;
    PipelineOptions pipeline =
        pipeline_options(result->device, options, name, plan_memory, constants);
    // Split reductions have no size-generic code (and their pieces follow the sizes): a class's
    // reductions run each row on one thread (on the CPU; the CUDA generator refuses a
    // size-generic kernel whose schedule splits its rows across blocks).
    pipeline.reduction_pieces = nullptr;
    // A value computed from weights alone is folded into a constant, but not one shaped by a
    // size (BERT's `position_ids[:, :tokens]`, and the position embeddings of it; a decoder's
    // causal mask over P + 1 positions, and `arange(1) + P`): its values would follow the sizes. It
    // stays an op of the graph. A fold whose value follows the sizes in another way gives
    // constants that differ between the bindings, and no class. A size equal to an integer that
    // stays (a side of 256 and a layer of 256 channels) says nothing of what follows the sizes.
    std::vector<int64_t> sizes = !dims.empty() ? dims.at(j) : checked_bindings.at(j);
    std::erase_if(sizes,
                  [&](int64_t v) { return std::binary_search(staying.begin(), staying.end(), v); });
    // A node of the import is judged by the import template (exactly: whether an integer of it
    // moves); a node the passes made, by the values above.
    const ImportedNodes imported_nodes = imported_nodes_of(result->imported, *imports[j].graph);
    pipeline.evaluate_constant = [fold = pipeline.evaluate_constant, sizes, moving = moving[j],
                                  imported_nodes](const ir::Node& node,
                                                  const std::vector<int64_t>& indices) {
      const bool type_only =
          std::find(indices.begin(), indices.end(), kTypeOnlyInput) != indices.end();
      const bool follows = imported_nodes.has(node)
                               ? imported_nodes.moves(node)
                               : shaped_by_a_size(node, sizes, type_only) ||
                                     follows_the_sizes(node, moving, type_only);
      return follows ? std::optional<int64_t>() : fold(node, indices);
    };
    kernel::RecordSizeDecisions recording;
    PipelineResult passes = run_pipeline(*imports[j].graph, pipeline);
    decisions.push_back(recording.decisions());
    if (j == 0) result->layout_conversions = passes.layout_conversions;
    constants_at.push_back(std::move(constants));
    graphs.push_back(std::move(imports[j].graph));
    kernels.push_back(std::move(passes.kernels));
  }
  std::vector<const ir::Graph*> views;
  for (const auto& g : graphs)
    views.push_back(g.get());
  std::string why_not;
  std::optional<GraphTemplate> graph = generalize_graph(views, checked_bindings, why_not);
  const std::vector<kernel::Kernel> checked_kernels = std::move(kernels.back());
  graphs.pop_back();
  kernels.pop_back();
  if (!graph) no_class(why_not);
  result->guards = decision_guards(decisions, checked_bindings);
  result->graph = std::move(*graph);
  for (size_t j = 1; j < constants_at.size(); ++j) {
    const std::string why = constants_difference(*graphs[0], constants_at[0], constants_at[j]);
    if (!why.empty()) no_class(why);
  }
  result->constants = std::move(constants_at[0]);
  for (size_t k = 0; k < kernels[0].size(); ++k) {
    std::vector<kernel::Kernel> lowered;
    for (const auto& at_binding : kernels)
      lowered.push_back(at_binding.at(k));
    if (k >= checked_kernels.size())
      no_class("kernel " + lowered[0].name + " is missing at a further binding");
    lowered.push_back(checked_kernels[k]);
    kernel::Generalized generic = kernel::generalize(lowered, checked_bindings);
    if (!generic.kernel) no_class("kernel " + lowered[0].name + ": " + generic.why_not);
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
    if (c.device_kernel) {
      // A GPU kernel launches bound to these sizes (null: nothing in it varies with them).
      if (auto at = c.device_kernel->at_sizes(sizes)) c.device_kernel = std::move(at);
      c.schedule_holds = nullptr;
      continue;
    }
    if (!c.launch_at) continue;  // nothing in it varies with the sizes
    const KernelLaunch launch = c.launch_at(sizes.data());
    c.range = launch.range;
    c.grain = launch.grain;
    c.size_values.assign(sizes.begin(), sizes.end());
    c.launch_at = nullptr;
    c.schedule_holds = nullptr;
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
