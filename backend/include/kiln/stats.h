// Process-wide counters of what kiln did, so users and tests can see that kiln (and not a
// fallback) ran their model. Both frontends count here; Python's kiln.stats() adds its own.
#pragma once

#include <cstdint>

#include "kiln/export.h"

namespace kiln {

struct Stats {
  int64_t specializations = 0;    // region specializations compiled (one per input signature)
  int64_t kernels = 0;            // generated kernels in them
  int64_t reused_kernels = 0;     // of those, taken from code compiled for an earlier plan
  int64_t extern_steps = 0;       // ops in them that run through ATen's dispatcher
  int64_t fallbacks = 0;          // specializations that run without kiln (compile failed, limit)
  double compile_seconds = 0;     // time spent compiling them
  int64_t frozen_weights = 0;     // weights compiled in as constants (torch.compile, inference)
  int64_t unfrozen_regions = 0;   // regions that compiled again because a frozen weight changed
  int64_t disk_cache_hits = 0;    // disk-cache lookups (code modules, graphs) with a good entry
  int64_t disk_cache_misses = 0;  // and without one
  int64_t modules_compiled = 0;   // CPU code modules LLVM compiled
  int64_t modules_loaded = 0;     // CPU code modules loaded instead (disk cache or a package)
  int64_t graphs_loaded = 0;      // specializations whose optimized graph was loaded instead of
                                  // made by the graph passes (disk cache or a package)
  int64_t shape_classes = 0;      // of the specializations, shape classes: compiled once for
                                  // every size of some input dims
  int64_t class_plans = 0;        // plans made from a shape class for a new size (no compile)
  int64_t shared_constant_bytes = 0;  // folded constants (packed weights, ...) taken from an
                                      // earlier compile of the same bytes, not kept again
};

/// A snapshot of the counters.
KILN_API Stats stats();
KILN_API void reset_stats();

}  // namespace kiln
