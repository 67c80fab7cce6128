#include "backend/codegen/cuda/cuda_code_generator.h"

#include "backend/codegen/cuda/compile_cuda_kernels.h"

namespace kiln::codegen {
namespace {

class CudaCodeGenerator final : public CodeGenerator {
 public:
  const char* name() const override { return "cuda"; }
  std::string unavailable_reason() const override {
    return cuda::cuda_codegen_unavailable_reason();
  }

  GeneratedKernels compile(const std::vector<kernel::Kernel>& kernels,
                           const CodegenRequest& request) const override {
    cuda::CudaCodegenOptions options;
    options.device = request.device_index;
    options.dump_prefix = request.dump_prefix;
    cuda::CompiledCudaKernels compiled = cuda::compile_cuda_kernels(kernels, options);
    GeneratedKernels generated;
    for (auto& kernel : compiled.kernels)
      generated.kernels.emplace_back().device_kernel = std::move(kernel);
    generated.compile_seconds = compiled.compile_seconds;
    return generated;
  }
};

}  // namespace

const CodeGenerator& cuda_code_generator() {
  static const CudaCodeGenerator generator;
  return generator;
}

}  // namespace kiln::codegen
