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
    for (size_t k = 0; k < compiled.kernels.size(); ++k) {
      CompiledKernel& out = generated.kernels.emplace_back();
      out.device_kernel = std::move(compiled.kernels[k]);
      out.schedule_holds = std::move(compiled.schedule_holds[k]);
    }
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
