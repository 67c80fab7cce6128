// Every kernel the LLVM code generator tests check is also rendered to CUDA C and compiled by
// NVRTC for sm_80 and sm_90, and ptxas accepts the PTX: the CUDA generator takes whatever the
// CPU one does. Runs when the tests of the process end (ctest runs one test per process, so
// each test's own kernels); skipped with a note where NVRTC is absent.
#include <cstdio>

#include <gtest/gtest.h>

#include "backend/codegen/cuda/cuda_emitter.h"
#include "codegen/codegen_harness.h"
#include "cuda/cuda_test_support.h"

namespace kiln::codegen::codegen_test {
namespace {

class CompileCheckedKernelsForCuda : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::vector<Kernel>& kernels = checked_kernels();
    if (kernels.empty()) return;
    if (const std::string why = kiln::cuda::nvrtc_unavailable_reason(); !why.empty()) {
      std::printf("note: %zu kernels not compiled for CUDA: %s\n", kernels.size(), why.c_str());
      return;
    }
    std::string source;
    try {
      source = cuda::emit_cuda_module(kernels).source;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "CUDA codegen rejected a kernel the CPU one takes: " << e.what();
      return;
    }
    const std::string ptxas = cuda_test::find_ptxas();
    for (int arch : cuda_test::kArchitectures) {
      try {
        const auto out = kiln::cuda::nvrtc_compile(source, arch, "checked_kernels");
        if (!ptxas.empty()) {
          EXPECT_EQ(cuda_test::ptxas_rejects(ptxas, out.ptx, arch, "checked_kernels"), "");
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "sm_" << arch << ": " << e.what();
      }
    }
  }
};

const auto* const registered =
    ::testing::AddGlobalTestEnvironment(new CompileCheckedKernelsForCuda);

}  // namespace
}  // namespace kiln::codegen::codegen_test
