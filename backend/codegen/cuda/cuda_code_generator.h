// The CUDA code generator behind the common interface (backend/codegen/code_generator.h).
#pragma once

#include "backend/codegen/code_generator.h"

namespace kiln::codegen {

/// The GPU generator: kernel IR -> CUDA C -> NVRTC for the device's architecture -> the driver.
const CodeGenerator& cuda_code_generator();

}  // namespace kiln::codegen
