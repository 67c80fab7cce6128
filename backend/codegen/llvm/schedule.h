// The CPU schedule of a kernel: how the work is split across threads, and how wide the vectors
// are. Torch-free and LLVM-free, so it is tested alone.
#pragma once

#include <cstdint>
#include <string>

#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

using kernel::collapse_dims;

/// How the runtime calls a kernel function fn(buffers, begin, end): over [0, range) in pieces
/// of at least `grain` (at::parallel_for's grain). Elementwise kernels split their elements,
/// reducing kernels their rows.
struct KernelLaunch {
  int64_t range = 0;
  int64_t grain = 1;
};

/// Roughly the work (in elements) below which splitting across threads costs more than it gains.
inline constexpr int64_t kParallelGrainElements = 262144;

KernelLaunch choose_launch(const kernel::Kernel& collapsed);

/// Vector width in bits for the host's feature string ("+avx512f,+avx2,..."): 512, 256 or 128.
int vector_bits_for(const std::string& features);

}  // namespace kiln::codegen
