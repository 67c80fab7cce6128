// The kernel IR's text form, for dumps (KILN_DUMP_DIR) and for tests with CHECK: patterns.
#pragma once

#include <string>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

std::string print_kernel(const Kernel& kernel);

}  // namespace kiln::kernel
