// Runs generated CUDA C on the CPU, for tests on machines without a GPU: the source is compiled
// as host C++ against a small emulation of the CUDA built-ins and launched with every thread of a
// block as an OS thread (so __syncthreads, warp shuffles and shared memory behave as on a GPU),
// blocks one after another. Slow, and only as faithful as the emulation: the real thing is
// scripts/gpu-check. What it checks is the generated code's indexing, schedules and arithmetic.
#pragma once

#include <cstdint>
#include <random>
#include <span>
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
  /// pointer per kernel buffer), plus a zeroed workspace when the schedule needs one; a
  /// size-generic kernel (and only one) at `sizes`, its size inputs.
  void launch(int index, const std::vector<void*>& buffers, unsigned grid,
              std::span<const int64_t> sizes = {});

 private:
  codegen::cuda::CudaModuleSource module_;
  void* library_ = nullptr;
  std::string path_;
};

/// "" when a host C++ compiler that can build the emulation is available, else why not.
std::string emulation_unavailable_reason();

using Bytes = std::vector<uint8_t>;

/// Random values for a buffer of `dtype`; float buffers also get NaN, +-inf and -0.
Bytes random_buffer(kernel::DType dtype, int64_t elements, std::mt19937_64& rng);

/// Runs every kernel emulated (two blocks, so every grid-stride loop goes round more than once)
/// and through the reference interpreter on the same random inputs. "" when every output agrees,
/// else the first difference of each kernel that differs, with the kernel. The emulation computes
/// float exp/log/tanh/erf/sigmoid/pow/sqrt/rsqrt as the interpreter does (in double, rounded
/// once), so kernels without a reduction must match bit for bit; results of reducing kernels
/// (whose sums the threads add in another order) may differ by 2 n u max(max|x|, 1) max(|want|, 1)
/// for rows of n elements and the result's unit roundoff u (at least 2^-24), plus twice what
/// scaling every sum by (1 + n u) moves the reference (results that amplify a sum's rounding).
std::string emulation_differences(const std::vector<kernel::Kernel>& kernels, uint64_t seed = 7);

/// A size-generic kernel emitted once, then emulated at each binding of its size inputs where its
/// schedule's guards hold (where a shape class would launch it), against the interpreter running
/// the kernel bound there; tolerances as emulation_differences'. `bindings_run` (if not null)
/// gets how many bindings ran. Throws std::invalid_argument when the kernel is not emitted
/// size-generic.
std::string emulation_differences_at(const kernel::Kernel& generic,
                                     const std::vector<std::vector<int64_t>>& bindings,
                                     int* bindings_run = nullptr, uint64_t seed = 7);

}  // namespace kiln::cuda_test
