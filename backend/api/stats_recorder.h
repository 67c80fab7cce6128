// Where the compile driver adds to the counters of kiln/stats.h.
#pragma once

#include "backend/api/compile_graph.h"

namespace kiln {

void record_compiled(const CompiledRegion& compiled);
void record_fallback();
/// A specialization compiled as a shape class (also counted by record_compiled).
void record_shape_class();
/// A plan made from a shape class for a binding it had no plan for.
void record_class_plan();
void record_frozen_weights(int64_t count);
void record_unfrozen_region();

}  // namespace kiln
