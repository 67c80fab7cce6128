#include "backend/codegen/llvm/compile_kernels.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <chrono>
#include <fstream>

#include "backend/codegen/llvm/kernel_emitter.h"
#include "passes/kernel/printer.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::codegen {
namespace {

std::string symbol_name(size_t i) {
  return "kiln_kernel_" + std::to_string(i);
}

struct BuiltModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::vector<KernelLaunch> launches;
};

BuiltModule build_module(const std::vector<kernel::Kernel>& kernels,
                         const CodegenOptions& options) {
  const std::string& features = jit::host_target().features;
  const int bits = options.vector_bits > 0 ? options.vector_bits : vector_bits_for(features);
  const MathTarget math{options.avx512_math && has_feature(features, "+avx512f") &&
                        has_feature(features, "+avx512vl")};
  BuiltModule built;
  built.context = std::make_unique<llvm::LLVMContext>();
  built.module = std::make_unique<llvm::Module>("kiln_plan", *built.context);
  for (size_t i = 0; i < kernels.size(); ++i) {
    kernel::Kernel collapsed = collapse_dims(kernels[i]);
    collapsed.name = symbol_name(i);
    built.launches.push_back(choose_launch(collapsed));
    emit_kernel(*built.module, collapsed, bits, math);
  }
  return built;
}

}  // namespace

CompiledKernels compile_kernels(const std::vector<kernel::Kernel>& kernels,
                                const CodegenOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (!options.dump_prefix.empty()) {
    std::ofstream out(options.dump_prefix + ".kernel");
    for (const auto& k : kernels)
      out << kernel::print_kernel(k) << "\n";
  }
  // A plan's repeated layers lower to the same kernels: each is compiled once.
  const kernel::DistinctKernels distinct = kernel::distinct_kernels(kernels);
  BuiltModule built = build_module(distinct.kernels, options);
  std::shared_ptr<jit::JitModule> code = jit::OrcJit::instance().add(
      std::move(built.module), std::move(built.context), options.dump_prefix);
  CompiledKernels compiled;
  for (size_t d : distinct.index) {
    auto fn = reinterpret_cast<KernelFunction>(code->lookup(symbol_name(d)));
    compiled.kernels.push_back({fn, built.launches[d]});
  }
  compiled.code = std::move(code);
  compiled.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

std::string kernels_assembly(const std::vector<kernel::Kernel>& kernels,
                             const CodegenOptions& options) {
  BuiltModule built = build_module(kernels, options);
  jit::optimize_module(*built.module);
  return jit::emit_assembly(*built.module);
}

}  // namespace kiln::codegen
