// Runs generated CUDA C on the CPU, for tests on machines without a GPU: the source is compiled
// as host C++ against a small emulation of the CUDA built-ins and launched with every thread of a
// block as an OS thread (so __syncthreads, warp shuffles and shared memory behave as on a GPU),
// blocks one after another. Slow, and only as faithful as the emulation: the real thing is
// scripts/gpu-check. What it checks is the generated code's indexing, schedules and arithmetic.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/codegen/cuda/cuda_emitter.h"

namespace kiln::cuda_test {

class EmulatedModule {
 public:
  /// Compiles `module` with the host compiler (g++ or $CXX); throws std::runtime_error with the
  /// compiler's output when it fails.
  explicit EmulatedModule(const codegen::cuda::CudaModuleSource& module);
  ~EmulatedModule();

  /// Runs kernel `index` over `grid` blocks of its schedule's block size on `buffers` (one host
  /// pointer per kernel buffer), plus a zeroed workspace when the schedule needs one.
  void launch(int index, const std::vector<void*>& buffers, unsigned grid);

 private:
  codegen::cuda::CudaModuleSource module_;
  void* library_ = nullptr;
  std::string path_;
};

/// "" when a host C++ compiler that can build the emulation is available, else why not.
std::string emulation_unavailable_reason();

}  // namespace kiln::cuda_test
