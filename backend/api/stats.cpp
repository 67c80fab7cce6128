#include "kiln/stats.h"

#include "backend/api/stats_recorder.h"

#include <mutex>

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

}  // namespace

Stats stats() {
  std::lock_guard lock(stats_mutex());
  return counters();
}

void reset_stats() {
  std::lock_guard lock(stats_mutex());
  counters() = Stats{};
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
