// Profile: the executor's per-step timings (runtime/step_profiler.h) turned into per-call times
// and shares, and the text and JSON `kiln profile` and kiln.profile print.
#include "kiln/profile.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "backend/api/json_text.h"
#include "kiln/error.h"
#include "runtime/step_profiler.h"

namespace kiln {
namespace {

// "plan 0, kernel 3: aten::add.Tensor + aten::relu", the op list cut to fit a terminal line.
std::string describe(const ProfiledStep& step) {
  std::string text = "plan " + std::to_string(step.plan) + ", " + step.name;
  if (step.ops.empty()) return text;
  constexpr size_t kMaxOps = 72;
  std::string ops = step.ops;
  if (ops.size() > kMaxOps) {
    const auto count = 1 + std::count(ops.begin(), ops.end(), '+');
    ops = ops.substr(0, kMaxOps) + "... (" + std::to_string(count) + " ops)";
  }
  return text + ": " + ops;
}

std::string json_sizes(const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace

void start_profiling() {
  StepProfiler::start();
}

Profile finish_profiling(int calls, double call_ms) {
  std::vector<StepTiming> timings = StepProfiler::stop();
  if (calls <= 0) {
    throw Error(ErrorKind::InvalidInput,
                "finish_profiling: calls must be at least 1, got " + std::to_string(calls));
  }
  Profile profile;
  profile.calls = calls;
  profile.call_ms = call_ms;
  std::map<std::string, double> categories;
  for (StepTiming& timing : timings) {
    ProfiledStep step;
    step.plan = timing.plan;
    step.step = timing.step;
    step.name = std::move(timing.name);
    step.category = std::move(timing.label.category);
    step.ops = std::move(timing.label.ops);
    step.input_sizes = std::move(timing.label.input_sizes);
    step.output_sizes = std::move(timing.label.output_sizes);
    step.runs = timing.calls;
    step.ms = timing.seconds * 1e3 / calls;
    step.share = call_ms > 0 ? step.ms / call_ms : 0;
    profile.steps_ms += step.ms;
    categories[step.category] += step.ms;
    profile.steps.push_back(std::move(step));
  }
  std::stable_sort(profile.steps.begin(), profile.steps.end(),
                   [](const ProfiledStep& a, const ProfiledStep& b) { return a.ms > b.ms; });
  profile.categories.assign(categories.begin(), categories.end());
  std::stable_sort(profile.categories.begin(), profile.categories.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return profile;
}

std::string Profile::to_text(int max_rows) const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(3);
  const double outside_ms = std::max(0.0, call_ms - steps_ms);
  auto share = [&](double ms) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(1) << std::setw(5)
      << (call_ms > 0 ? 100 * ms / call_ms : 0.0) << "%";
    return s.str();
  };
  out << calls << " calls, " << call_ms << " ms a call: " << steps_ms << " ms in " << steps.size()
      << " plan steps, " << outside_ms
      << " ms outside them (guards, the interpreter or Python, ops kiln did not compile)\n\n";
  out << "   ms/call  share  category       step\n";
  const size_t rows = std::min(steps.size(), static_cast<size_t>(std::max(max_rows, 0)));
  for (size_t i = 0; i < rows; ++i) {
    const ProfiledStep& step = steps[i];
    out << std::setw(10) << step.ms << " " << share(step.ms) << "  " << std::left << std::setw(13)
        << step.category << std::right << "  " << describe(step) << "\n";
  }
  if (rows < steps.size()) {
    double rest = 0;
    for (size_t i = rows; i < steps.size(); ++i)
      rest += steps[i].ms;
    out << std::setw(10) << rest << " " << share(rest) << "  " << std::setw(13) << ""
        << "  " << steps.size() - rows << " more steps\n";
  }
  out << std::setw(10) << outside_ms << " " << share(outside_ms) << "  " << std::left
      << std::setw(13) << "-" << std::right << "  outside kiln's plan steps\n\nby category:\n";
  for (const auto& [category, ms] : categories) {
    out << std::setw(10) << ms << " " << share(ms) << "  " << category << "\n";
  }
  return out.str();
}

std::string Profile::to_json() const {
  std::ostringstream out;
  out << std::setprecision(6) << "{\"calls\": " << calls << ", \"call_ms\": " << call_ms
      << ", \"steps_ms\": " << steps_ms << ", \"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const ProfiledStep& s = steps[i];
    out << (i ? ", " : "") << "{\"plan\": " << s.plan << ", \"step\": " << s.step
        << ", \"name\": " << json_string(s.name) << ", \"category\": " << json_string(s.category)
        << ", \"ops\": " << json_string(s.ops) << ", \"input\": " << json_sizes(s.input_sizes)
        << ", \"output\": " << json_sizes(s.output_sizes) << ", \"runs\": " << s.runs
        << ", \"ms\": " << s.ms << ", \"share\": " << s.share << "}";
  }
  out << "], \"categories\": {";
  for (size_t i = 0; i < categories.size(); ++i) {
    out << (i ? ", " : "") << json_string(categories[i].first) << ": " << categories[i].second;
  }
  out << "}}";
  return out.str();
}

}  // namespace kiln
