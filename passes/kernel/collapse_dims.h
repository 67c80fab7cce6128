// The same kernel over fewer dimensions, for code generators: fewer index computations, and
// longer runs of contiguous memory in the innermost loop. Target-neutral (every backend uses it).
#pragma once

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// Size-1 dimensions dropped, row dimensions put in the memory order of the first output (so a
/// channels-last output is walked channel-innermost), and neighbours merged where every index map
/// walks them as one (stride[d] == stride[d+1] * size[d+1]). Row dimensions merge only with row
/// dimensions and reduced ones with reduced ones. The result has at least one dimension, and at
/// least one reduced dimension when the kernel reduces.
Kernel collapse_dims(const Kernel& kernel);

}  // namespace kiln::kernel
