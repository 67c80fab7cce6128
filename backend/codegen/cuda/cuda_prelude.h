// The device functions every generated CUDA kernel source starts with: 16-bit float
// conversions, NaN-propagating max/min and block reductions. Plain CUDA C, no headers, so NVRTC
// needs no include path.
#pragma once

namespace kiln::codegen::cuda {

extern const char* const kCudaPrelude;

}  // namespace kiln::codegen::cuda
