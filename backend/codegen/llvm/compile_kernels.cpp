#include "backend/codegen/llvm/compile_kernels.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "backend/codegen/llvm/compile_groups.h"
#include "backend/codegen/llvm/kernel_emitter.h"
#include "backend/codegen/llvm/store_policy.h"
#include "kiln/error.h"
#include "passes/kernel/printer.h"
#include "passes/kernel/size_terms.h"
#include "passes/kernel/split_reduction.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::codegen {
namespace {

std::string symbol_name(size_t i) {
  return "kiln_kernel_" + std::to_string(i);
}

std::string finish_symbol_name(size_t i) {
  return symbol_name(i) + "_finish";
}

void set_launch(CompiledKernel& kernel, const KernelLaunch& launch) {
  kernel.range = launch.range;
  kernel.grain = launch.grain;
}

/// A size-generic kernel's launch at each call's size inputs (`kernel` collapsed, scheduled as
/// `schedule`), and the test of the guards its code does not adapt to at run time; none for a
/// kernel of constant sizes. Those are the store policy's byte thresholds on the iteration
/// space (streaming stores, prefetched rows). The other tests the generic code makes per call or
/// needs not: a row longer than the row caches skips them, a row shorter than a vector takes two
/// passes for its moments, a sum over a run-time row is always chunked, a transpose walks its
/// tiles at any size.
void set_launch_rule(CompiledKernel& compiled, const kernel::Kernel& kernel,
                     const CpuSchedule& schedule) {
  compiled.launch_at = nullptr;
  compiled.schedule_holds = nullptr;
  if (!kernel::is_size_generic(kernel)) return;
  const bool tiles = schedule.strategy == CpuSchedule::Strategy::Transpose;
  const size_t inputs = kernel.size_inputs.size();
  compiled.launch_at = [rule = launch_rule(kernel, tiles), inputs](const int64_t* sizes) {
    return rule.at(std::span<const int64_t>(sizes, inputs));
  };
  kernel::SizeGuards guards;
  for (const kernel::SizeGuard& g : schedule.guards)
    if (g.extent == kernel::Extent::Elements) guards.push_back(g);
  if (guards.empty()) return;
  compiled.schedule_holds = [kernel, guards, inputs](const int64_t* sizes) {
    return kernel::guards_hold(guards,
                               kernel::bind_sizes(kernel, std::span<const int64_t>(sizes, inputs)));
  };
}

struct BuiltModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::vector<KernelLaunch> launches;
  /// Per kernel: its finish phase (function not yet looked up) when it was split.
  std::vector<std::optional<FinishPhase>> finishes;
};

/// The finish phase of `split`, but its function: where the partials go in the workspace.
FinishPhase finish_phase(const kernel::SplitReduction& split, size_t num_buffers) {
  FinishPhase finish;
  finish.rows = split.rows;
  finish.buffers = split.finish_buffers;
  for (size_t b = num_buffers; b < split.partial.buffers.size(); ++b) {
    finish.workspace_offsets.push_back(finish.workspace_bytes);
    const int64_t bytes =
        split.pieces * split.rows * ir::dtype_size(split.partial.buffers[b].dtype);
    finish.workspace_bytes += (bytes + 7) / 8 * 8;
  }
  return finish;
}

/// A collapsed kernel (collapse_dims.h) and its schedule.
struct ScheduledKernel {
  kernel::Kernel kernel;
  CpuSchedule schedule;
};

std::vector<ScheduledKernel> scheduled(const std::vector<kernel::Kernel>& kernels,
                                       const CpuTarget& target) {
  std::vector<ScheduledKernel> result;
  for (const kernel::Kernel& k : kernels) {
    kernel::Kernel collapsed = collapse_dims(k);
    CpuSchedule schedule = schedule_cpu_kernel(collapsed, target);
    result.push_back({std::move(collapsed), std::move(schedule)});
  }
  return result;
}

BuiltModule build_module(std::vector<ScheduledKernel> kernels, const CodegenOptions& options) {
  const CodeVariant variant = code_variant(options);
  const MathTarget math{variant.avx512_math};
  BuiltModule built;
  built.context = std::make_unique<llvm::LLVMContext>();
  built.module = std::make_unique<llvm::Module>("kiln_plan", *built.context);
  const CpuTarget target = variant.target;
  // Each kernel is emitted as its schedule says; returns its launch.
  auto emit = [&](const kernel::Kernel& k, const CpuSchedule& schedule) {
    emit_kernel(*built.module, k, schedule, math);
    return schedule.launch;
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    kernel::Kernel& k = kernels[i].kernel;
    k.name = symbol_name(i);
    std::optional<kernel::SplitReduction> split;
    // The pipeline chose the pieces (split_reductions pass, Kernel::split_pieces).
    if (k.split_pieces > 0) split = kernel::split_into_pieces(k, k.split_pieces);
    if (!split) {
      built.launches.push_back(emit(k, kernels[i].schedule));
      built.finishes.emplace_back();
      continue;
    }
    // What runs instead is the partial kernel over the pieces, then the finish: each has its
    // own schedule.
    kernel::Kernel partial = collapse_dims(split->partial), finish = split->finish;
    partial.name = symbol_name(i);
    finish.name = finish_symbol_name(i);
    built.launches.push_back(emit(partial, schedule_cpu_kernel(partial, target)));
    built.finishes.push_back(finish_phase(*split, k.buffers.size()));
    emit(finish, schedule_cpu_kernel(finish, target));
  }
  return built;
}

}  // namespace

CodeVariant code_variant(const CodegenOptions& options) {
  const std::string& features = jit::host_target().features;
  CodeVariant variant;
  variant.target = {options.vector_bits > 0 ? options.vector_bits : vector_bits_for(features),
                    options.stream_bytes > 0 ? options.stream_bytes : host_stream_bytes(),
                    options.one_pass_moments};
  variant.avx512_math = options.avx512_math && has_feature(features, "+avx512f") &&
                        has_feature(features, "+avx512vl");
  return variant;
}

bool llvm_covers(kernel::Op op, kernel::DType operand) {
  if (op == kernel::Op::Div && !ir::is_floating(operand)) return false;
  return kernel::defined_on(op, operand);
}

CompiledKernels compile_kernels(const std::vector<kernel::Kernel>& kernels,
                                const CodegenOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  for (const kernel::Kernel& k : kernels) {
    if (const auto op = kernel::first_uncovered_op(k, llvm_covers))
      throw Error(ErrorKind::Unsupported, "LLVM codegen has no " + *op + " (in " + k.name + ")");
    if (const std::string problem = kernel::generic_problem(k); !problem.empty())
      throw Error(ErrorKind::Unsupported, "LLVM codegen: kernel " + k.name + ": " + problem);
  }
  if (!options.dump_prefix.empty()) {
    std::ofstream out(options.dump_prefix + ".kernel");
    for (const auto& k : kernels) {
      out << kernel::print_kernel(k) << "\n";
      // What the code runs instead: the partial kernel over the pieces, then the finish.
      if (const auto split = kernel::split_into_pieces(collapse_dims(k), k.split_pieces))
        out << kernel::print_kernel(split->partial) << "\n"
            << kernel::print_kernel(split->finish) << "\n";
    }
  }
  // A plan's repeated layers lower to the same kernels: each is compiled once, and not at all
  // if an earlier plan whose code is still loaded has it.
  const kernel::DistinctKernels distinct = kernel::distinct_kernels(kernels);
  const CodeVariant variant = code_variant(options);
  KernelCache& cache = KernelCache::instance();
  auto modules = std::make_shared<std::vector<std::shared_ptr<jit::JitModule>>>();
  auto hold = [&](const std::shared_ptr<jit::JitModule>& code) {
    if (std::find(modules->begin(), modules->end(), code) == modules->end())
      modules->push_back(code);
  };
  // Found by code key: a kernel over another outermost size can share the code (code_key).
  std::vector<ScheduledKernel> flat = scheduled(distinct.kernels, variant.target);
  std::vector<CompiledKernel> by_distinct(flat.size());
  std::vector<kernel::Kernel> fresh;
  std::vector<CpuSchedule> fresh_schedules;
  std::vector<CacheKey> fresh_keys;
  std::vector<size_t> fresh_at;  // where each fresh kernel is in distinct.kernels
  for (size_t d = 0; d < flat.size(); ++d) {
    const CpuSchedule& schedule = flat[d].schedule;
    CacheKey key{code_key(flat[d].kernel, schedule), schedule_key(schedule), variant};
    if (options.reuse_kernels && options.dump_prefix.empty()) {
      if (std::optional<CachedKernel> hit = cache.find(key)) {
        by_distinct[d] = hit->kernel;
        // A split kernel is a full reduction, whose code key keeps every size.
        if (!hit->kernel.finish) set_launch(by_distinct[d], schedule.launch);
        set_launch_rule(by_distinct[d], flat[d].kernel, schedule);
        hold(hit->code);
        continue;
      }
    }
    fresh.push_back(std::move(flat[d].kernel));
    fresh_schedules.push_back(std::move(flat[d].schedule));
    fresh_keys.push_back(std::move(key));
    fresh_at.push_back(d);
  }
  // Fresh kernels compile in modules of their own on several threads (compile_groups.h); one
  // module when dumped, so that the .ll and .s show the whole plan.
  const std::vector<std::vector<size_t>> groups =
      compile_groups(fresh, options.dump_prefix.empty() ? options.compile_threads : 1);
  std::vector<std::shared_ptr<jit::JitModule>> codes(groups.size());
  std::vector<std::vector<KernelLaunch>> launches(groups.size());
  std::vector<std::vector<std::optional<FinishPhase>>> finishes(groups.size());
  run_concurrently(groups.size(), [&](size_t g) {
    std::vector<ScheduledKernel> members;
    for (size_t f : groups[g])
      members.push_back({fresh[f], fresh_schedules[f]});
    BuiltModule built = build_module(std::move(members), options);
    launches[g] = std::move(built.launches);
    finishes[g] = std::move(built.finishes);
    codes[g] = jit::OrcJit::instance().add(std::move(built.module), std::move(built.context),
                                           options.dump_prefix);
  });
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t i = 0; i < groups[g].size(); ++i) {
      const size_t f = groups[g][i];
      CompiledKernel kernel;
      kernel.function = reinterpret_cast<KernelFunction>(codes[g]->lookup(symbol_name(i)));
      set_launch(kernel, launches[g][i]);
      set_launch_rule(kernel, fresh[f], fresh_schedules[f]);
      kernel.finish = finishes[g][i];
      if (kernel.finish)
        kernel.finish->function =
            reinterpret_cast<KernelFunction>(codes[g]->lookup(finish_symbol_name(i)));
      by_distinct[fresh_at[f]] = kernel;
      cache.add(fresh_keys[f], codes[g], kernel);
    }
    hold(codes[g]);
  }
  CompiledKernels compiled;
  compiled.modules = static_cast<int>(codes.size());
  for (const auto& code : codes)
    compiled.modules_loaded += code->loaded();
  compiled.reused = static_cast<int>(distinct.kernels.size() - fresh.size());
  for (size_t d : distinct.index)
    compiled.kernels.push_back(by_distinct[d]);
  compiled.code = std::move(modules);
  compiled.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

std::string kernels_assembly(const std::vector<kernel::Kernel>& kernels,
                             const CodegenOptions& options) {
  BuiltModule built = build_module(scheduled(kernels, code_variant(options).target), options);
  jit::optimize_module(*built.module);
  return jit::emit_assembly(*built.module);
}

}  // namespace kiln::codegen
