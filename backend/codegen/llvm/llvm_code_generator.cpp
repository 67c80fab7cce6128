#include "backend/codegen/llvm/llvm_code_generator.h"

#include "backend/codegen/llvm/compile_kernels.h"

namespace kiln::codegen {
namespace {

class LlvmCodeGenerator final : public CodeGenerator {
 public:
  const char* name() const override { return "llvm"; }
  std::string unavailable_reason() const override { return ""; }
  int64_t reduction_pieces(const kernel::Kernel& kernel) const override {
    return codegen::reduction_pieces(kernel::collapse_dims(kernel));
  }

  GeneratedKernels compile(const std::vector<kernel::Kernel>& kernels,
                           const CodegenRequest& request) const override {
    CodegenOptions options;
    options.dump_prefix = request.dump_prefix;
    options.reuse_kernels = request.reuse_kernels;
    options.one_pass_moments = request.one_pass_moments;
    options.compile_threads = request.compile_threads;
    CompiledKernels compiled = compile_kernels(kernels, options);
    return {std::move(compiled.kernels),
            std::move(compiled.code),
            compiled.compile_seconds,
            compiled.reused,
            compiled.modules,
            compiled.modules_loaded};
  }
};

}  // namespace

const CodeGenerator& llvm_code_generator() {
  static const LlvmCodeGenerator generator;
  return generator;
}

}  // namespace kiln::codegen
