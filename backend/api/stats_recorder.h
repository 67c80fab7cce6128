// Where the compile driver adds to the counters of kiln/stats.h.
#pragma once

#include "backend/api/compile_graph.h"

namespace kiln {

void record_compiled(const CompiledRegion& compiled);
void record_fallback();
void record_frozen_weights(int64_t count);
void record_unfrozen_region();

}  // namespace kiln
