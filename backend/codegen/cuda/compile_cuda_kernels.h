// The CUDA code generator's front door: all kernels of one plan become one CUDA C translation
// unit, compiled by NVRTC for the device's architecture (cached per source and architecture) and
// loaded through the driver when first launched. Torch-free.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/kernel/kernel.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen::cuda {

/// "" when kiln can generate and run CUDA kernels in this process; else why not (NVRTC or the
/// driver missing, no GPU).
std::string cuda_codegen_unavailable_reason();

struct CudaCodegenOptions {
  int device = 0;  // the GPU the kernels will run on
  int arch = 0;    // sm_<arch>; 0: the device's compute capability
  /// Where <prefix>.cu (the source) and <prefix>.ptx are written; empty: nowhere.
  std::string dump_prefix;
};

struct CompiledCudaKernels {
  std::vector<std::shared_ptr<const DeviceKernel>> kernels;  // one per input kernel, in order
  /// Per kernel: for a size-generic one, whether its schedule holds at a binding of its size
  /// inputs (CompiledKernel::schedule_holds); null for a kernel of constant sizes.
  std::vector<std::function<bool(const int64_t* sizes)>> schedule_holds;
  double compile_seconds = 0;
};

/// Throws kiln::Error: Unsupported when CUDA is unavailable or a kernel cannot be expressed,
/// Backend (with NVRTC's log) when compilation fails.
CompiledCudaKernels compile_cuda_kernels(const std::vector<kernel::Kernel>& kernels,
                                         const CudaCodegenOptions& options);

}  // namespace kiln::codegen::cuda
