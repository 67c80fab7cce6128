// Which code generator serves a device: LLVM for the CPU (when kiln was built with it), CUDA for
// NVIDIA GPUs (when NVRTC and the driver load); KILN_DISABLE=llvm or cuda turns one off.
#pragma once

#include <c10/core/Device.h>

#include "backend/codegen/code_generator.h"

namespace kiln {

/// The generator for `device`, or null: every op then runs through ATen there. The first CUDA
/// request warns once when CUDA code generation is unavailable, and says why.
const codegen::CodeGenerator* code_generator_for(c10::Device device);

}  // namespace kiln
