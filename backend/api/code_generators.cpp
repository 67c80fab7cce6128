#include "backend/api/code_generators.h"

#ifndef KILN_HAVE_LLVM
#define KILN_HAVE_LLVM 0
#endif

#include <mutex>

#include "backend/api/environment.h"
#include "backend/codegen/cuda/cuda_code_generator.h"
#if KILN_HAVE_LLVM
#include "backend/codegen/llvm/llvm_code_generator.h"
#endif

namespace kiln {

const codegen::CodeGenerator* code_generator_for(c10::Device device) {
  if (device.is_cpu()) {
#if KILN_HAVE_LLVM
    if (!disabled_names().contains("llvm")) return &codegen::llvm_code_generator();
#endif
    return nullptr;
  }
  if (!device.is_cuda() || disabled_names().contains("cuda")) return nullptr;
  const codegen::CodeGenerator& cuda = codegen::cuda_code_generator();
  static const std::string why_not = cuda.unavailable_reason();
  if (!why_not.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      log(LogLevel::Warn, "no CUDA code generation, CUDA ops run through ATen: " + why_not);
    });
    return nullptr;
  }
  return &cuda;
}

}  // namespace kiln
