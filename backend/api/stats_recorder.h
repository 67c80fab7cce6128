// Where the compile driver adds to the counters of kiln/stats.h.
#pragma once

#include "backend/api/compile_graph.h"

namespace kiln {

void record_compiled(const CompiledRegion& compiled);
void record_fallback();

}  // namespace kiln
