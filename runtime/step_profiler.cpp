#include "runtime/step_profiler.h"

#include <string>
#include <type_traits>
#include <variant>

#include "kiln/error.h"

namespace kiln {

std::atomic<StepProfiler*> StepProfiler::active_{nullptr};

namespace {
// One session object for the life of the process, reused: a call on another thread that loaded
// the pointer just before stop() may still record into it, so it is never freed.
StepProfiler& the_session() {
  static StepProfiler* session = new StepProfiler;
  return *session;
}
std::mutex opening_mutex;  // start() and stop() one at a time
}  // namespace

void StepProfiler::start() {
  std::lock_guard<std::mutex> lock(opening_mutex);
  if (active_.load()) {
    throw Error(ErrorKind::InvalidInput,
                "a kiln profiling session is already open; profile one thing at a time");
  }
  StepProfiler& session = the_session();
  {
    std::lock_guard<std::mutex> session_lock(session.mutex_);
    session.plan_numbers_.clear();
    session.timings_.clear();
  }
  active_.store(&session, std::memory_order_release);
}

std::vector<StepTiming> StepProfiler::stop() {
  std::lock_guard<std::mutex> lock(opening_mutex);
  StepProfiler* session = active_.exchange(nullptr);
  if (!session) return {};
  std::lock_guard<std::mutex> session_lock(session->mutex_);
  std::vector<StepTiming> timings;
  for (auto& [key, timing] : session->timings_)
    timings.push_back(std::move(timing));
  session->timings_.clear();
  session->plan_numbers_.clear();
  return timings;
}

void StepProfiler::record(const Plan& plan, size_t step, bool relayout, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, first] = plan_numbers_.emplace(&plan, static_cast<int>(plan_numbers_.size()));
  const int index = static_cast<int>(step);
  StepTiming& timing = timings_[{it->second, 2 * index + (relayout ? 1 : 0)}];
  if (timing.calls == 0) {
    timing.plan = it->second;
    timing.step = index;
    std::visit(
        [&](const auto& s) {
          // A kernel's inputs are re-laid out before it, an extern step's output after it.
          const bool kernel = std::is_same_v<std::decay_t<decltype(s)>, KernelStep>;
          const std::string relayout_name =
              (kernel ? "re-layout for " : "re-layout after ") + s.name;
          timing.name = relayout ? relayout_name : s.name;
          timing.label = s.label;
          const auto& sizes = kernel ? s.label.input_sizes : s.label.output_sizes;
          if (relayout) timing.label = {"layout", "", sizes, sizes};
        },
        plan.steps[step]);
  }
  ++timing.calls;
  timing.seconds += seconds;
}

}  // namespace kiln
