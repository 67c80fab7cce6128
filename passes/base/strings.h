// String helpers shared by every layer: the lists kiln's messages quote.
#pragma once

#include <string>
#include <vector>

#include "passes/base/export.h"

namespace kiln {

/// "a, b, c" (items joined by `separator`).
KILN_INTERNAL std::string joined(const std::vector<std::string>& items,
                                 const std::string& separator = ", ");

}  // namespace kiln
