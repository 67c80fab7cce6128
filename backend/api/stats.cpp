#include "kiln/stats.h"

#include "backend/api/stats_recorder.h"

#include <mutex>

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/disk_cache.h"
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

// The disk cache counts since the process began; stats() reports them since the last reset.
struct DiskCounts {
  int64_t hits = 0, misses = 0;
};

DiskCounts disk_counts() {
#ifdef KILN_HAVE_LLVM
  const jit::DiskCache* cache = jit::DiskCache::opened();
  if (!cache) return {};
  const jit::DiskCache::Counts counts = cache->counts();
  return {counts.hits, counts.misses};
#else
  return {};
#endif
}

DiskCounts& disk_baseline() {
  static DiskCounts baseline;
  return baseline;
}

}  // namespace

Stats stats() {
  std::lock_guard lock(stats_mutex());
  Stats s = counters();
  const DiskCounts now = disk_counts();
  s.disk_cache_hits = now.hits - disk_baseline().hits;
  s.disk_cache_misses = now.misses - disk_baseline().misses;
  return s;
}

void reset_stats() {
  std::lock_guard lock(stats_mutex());
  counters() = Stats{};
  disk_baseline() = disk_counts();
}

void record_compiled(const CompiledRegion& compiled) {
  std::lock_guard lock(stats_mutex());
  Stats& s = counters();
  ++s.specializations;
  s.kernels += compiled.kernels;
  s.reused_kernels += compiled.reused_kernels;
  for (const ExplainEntry& entry : compiled.entries) {
    if (entry.where == RunsIn::ExternAten) ++s.extern_steps;
  }
  s.compile_seconds += compiled.compile_seconds;
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
