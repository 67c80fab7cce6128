// Kernel IR to CUDA C: the GPU sibling of the kernel IR printer. Torch-free and CUDA-free (the
// text is compiled by NVRTC at run time, see runtime/cuda).
//
// Each kernel becomes one `extern "C" __global__` function taking its buffers as pointers, in
// buffer order (inputs `const` and `__restrict__`; the two buffers of an in-place pair lose
// `__restrict__`), with every size, stride and offset a constant; a size-generic kernel
// (passes/kernel/size_terms.h) takes its size inputs after them (`const long long size0, ...`) and
// computes the sizes, strides and offsets that carry terms from them, so one function serves
// every binding where its schedule's guards hold. What a kernel computes is the
// reference interpreter's definition; the schedule (cuda_schedule.h) only decides how threads
// walk it. A kernel launched in several phases (a split softmax) is one device function taking
// the phase, and one __global__ function per phase (phase_entry). A reduction across rows
// (cuda_schedule.h) gives each lane of a warp its own row.
//
//   extern "C" __global__ void __launch_bounds__(256)
//   k0(const float* __restrict__ b0, float* __restrict__ b1) {
//     for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 4096; i += gridDim.x * blockDim.x) {
//       const int c0 = i;
//       const float v0 = b0[c0];
//       const float v1 = expf(v0);
//       b1[c0] = v1;
//     }
//   }
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/codegen/cuda/cuda_schedule.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen::cuda {

/// The __global__ function that runs phase `phase` of a kernel whose first is `entry` (see
/// CudaSchedule::phases): `entry` itself for phase 0.
std::string phase_entry(const std::string& entry, int phase);

struct CudaKernelSource {
  std::string entry;      // the __global__ function's name (of phase 0)
  CudaSchedule schedule;  // at a size-generic kernel's example binding
  int num_buffers = 0;
  /// A size-generic kernel, collapsed as it was emitted: bound to a binding (bind_sizes), it
  /// gives that binding's launch (cuda_blocks) and whether the schedule's guards hold there.
  std::optional<kernel::Kernel> generic;
};

struct CudaModuleSource {
  std::string source;  // the prelude, then every kernel
  std::vector<CudaKernelSource> kernels;
};

/// The (op, operand dtype) pairs the CUDA printer covers: every pair the kernel IR defines
/// (kernel::defined_on). emit_cuda_module rejects a kernel with any other op before printing.
bool cuda_covers(kernel::Op op, kernel::DType operand);

/// One translation unit for all kernels of a plan (each collapsed first). Throws kiln::Error
/// (Unsupported) for a kernel it cannot express: an op it does not cover, a size-generic kernel
/// that generic_problem refuses or whose rows its schedule splits across blocks.
CudaModuleSource emit_cuda_module(const std::vector<kernel::Kernel>& kernels);

/// One kernel's function alone, without the prelude, for tests and dumps. `kernel` must be
/// collapsed.
std::string emit_cuda_kernel(const kernel::Kernel& kernel, const CudaSchedule& schedule,
                             const std::string& entry);

}  // namespace kiln::codegen::cuda
