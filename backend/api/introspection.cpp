#include "backend/api/introspection.h"

#include "backend/codegen/cuda/compile_cuda_kernels.h"
#include "passes/kernel/lower_ops.h"
#include "passes/pipeline.h"
#include "runtime/cuda/nvrtc.h"
#include "runtime/jit/object_cache.h"

namespace kiln {

std::vector<std::string> pass_names() {
  return pipeline_pass_names();
}

std::vector<std::string> native_ops() {
  return kernel::lowered_ops();
}

CudaStatus cuda_status() {
  return {cuda::nvrtc_library_path(), cuda::nvrtc_version(),
          codegen::cuda::cuda_codegen_unavailable_reason()};
}

std::string build_id() {
  return jit::build_id();
}

}  // namespace kiln
