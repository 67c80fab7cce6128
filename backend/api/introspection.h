// What kiln's Python extension asks of the library besides compiling: the pass pipeline, the
// operators kiln generates kernels for, and whether it can generate CUDA kernels here.
#pragma once

#include <string>
#include <vector>

#include "passes/base/export.h"

namespace kiln {

/// The pass pipeline in order; each name works in KILN_DISABLE.
KILN_INTERNAL std::vector<std::string> pass_names();

/// The operators kiln generates kernels for ("aten::add.Tensor", ...).
KILN_INTERNAL std::vector<std::string> native_ops();

struct CudaStatus {
  std::string nvrtc_library;       // the NVRTC library in use ("" when none loads)
  int nvrtc_version = 0;           // major * 1000 + minor * 10
  std::string unavailable_reason;  // why kiln cannot generate CUDA kernels ("" when it can)
};
KILN_INTERNAL CudaStatus cuda_status();

}  // namespace kiln
