#include "kiln/stats.h"

#include "backend/api/shared_constants.h"
#include "backend/api/stats_recorder.h"

#include <mutex>

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/disk_cache.h"
#include "runtime/jit/orc_jit.h"
#endif

namespace kiln {
namespace {

std::mutex& stats_mutex() {
  static std::mutex mutex;
  return mutex;
}

Stats& counters() {
  static Stats stats;
  return stats;
}

// The disk cache, the JIT and the shared constants count since the process began; stats()
// reports since the last reset.
struct CodeCounts {
  int64_t hits = 0, misses = 0, compiled = 0, loaded = 0, shared_bytes = 0;
};

CodeCounts code_counts() {
  CodeCounts now;
  now.shared_bytes = shared_constant_bytes();
#ifdef KILN_HAVE_LLVM
  if (const jit::DiskCache* cache = jit::DiskCache::opened()) {
    const jit::DiskCache::Counts counts = cache->counts();
    now.hits = counts.hits;
    now.misses = counts.misses;
  }
  const jit::OrcJit::Counts modules = jit::OrcJit::counts();
  now.compiled = modules.compiled;
  now.loaded = modules.loaded;
#endif
  return now;
}

CodeCounts& code_baseline() {
  static CodeCounts baseline;
  return baseline;
}

}  // namespace

Stats stats() {
  std::lock_guard lock(stats_mutex());
  Stats s = counters();
  const CodeCounts now = code_counts();
  const CodeCounts& base = code_baseline();
  s.disk_cache_hits = now.hits - base.hits;
  s.disk_cache_misses = now.misses - base.misses;
  s.modules_compiled = now.compiled - base.compiled;
  s.modules_loaded = now.loaded - base.loaded;
  s.shared_constant_bytes = now.shared_bytes - base.shared_bytes;
  return s;
}

void reset_stats() {
  std::lock_guard lock(stats_mutex());
  counters() = Stats{};
  code_baseline() = code_counts();
}

void record_compiled(const CompiledRegion& compiled) {
  std::lock_guard lock(stats_mutex());
  Stats& s = counters();
  ++s.specializations;
  s.kernels += compiled.kernels;
  s.reused_kernels += compiled.reused_kernels;
  s.graphs_loaded += compiled.graph_loaded;
  for (const ExplainEntry& entry : compiled.entries) {
    if (entry.where == RunsIn::ExternAten) ++s.extern_steps;
  }
  s.compile_seconds += compiled.compile_seconds;
}

void record_shape_class() {
  std::lock_guard lock(stats_mutex());
  ++counters().shape_classes;
}

void record_class_plan() {
  std::lock_guard lock(stats_mutex());
  ++counters().class_plans;
}

void record_fallback() {
  std::lock_guard lock(stats_mutex());
  ++counters().fallbacks;
}

void record_frozen_weights(int64_t count) {
  std::lock_guard lock(stats_mutex());
  counters().frozen_weights += count;
}

void record_unfrozen_region() {
  std::lock_guard lock(stats_mutex());
  ++counters().unfrozen_regions;
}

}  // namespace kiln
