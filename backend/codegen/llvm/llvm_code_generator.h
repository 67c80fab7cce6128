// The LLVM code generator behind the common interface (backend/codegen/code_generator.h).
#pragma once

#include "backend/codegen/code_generator.h"

namespace kiln::codegen {

/// The CPU generator: kernel IR -> LLVM IR -> machine code for this host, in the ORC JIT.
const CodeGenerator& llvm_code_generator();

}  // namespace kiln::codegen
