// Per-step timing of plans, for `kiln profile` and kiln.profile (backend/api/profile.cpp).
// While a session is open, the executor times every step of every plan it runs, on any thread,
// and adds the time here; closed, it costs the executor one atomic load per call.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/plan.h"

namespace kiln {

struct StepTiming {
  int plan = 0;      // plans numbered in the order they first ran in the session
  int step = 0;      // the step's index in its plan
  std::string name;  // the step's name; for the copies before a kernel, "re-layout for kernel N"
  StepLabel label;
  int64_t calls = 0;
  double seconds = 0;
};

class StepProfiler {
 public:
  /// The open session, or null.
  static StepProfiler* active() { return active_.load(std::memory_order_acquire); }
  /// Opens a session. Throws InvalidInput when one is already open (sessions do not nest: a
  /// step would be counted twice).
  static void start();
  /// Closes the session and returns its timings in plan and step order (empty when none is
  /// open).
  static std::vector<StepTiming> stop();

  /// Adds one run of `plan`'s step `step`; `relayout` for the copies that put a kernel's inputs
  /// in the layout it was compiled for (timed apart from the kernel).
  void record(const Plan& plan, size_t step, bool relayout, double seconds);

 private:
  static std::atomic<StepProfiler*> active_;
  std::mutex mutex_;
  std::map<const Plan*, int> plan_numbers_;
  std::map<std::pair<int, int>, StepTiming> timings_;  // (plan, 2 * step + relayout)
};

}  // namespace kiln
