#include "passes/base/environment.h"

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <vector>

namespace kiln {
namespace {

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The names in a comma-separated list variable, spaces trimmed.
std::set<std::string> names_in(const char* variable) {
  std::set<std::string> names;
  std::stringstream list(getenv_or_empty(variable));
  for (std::string name; std::getline(list, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) names.insert(name);
  }
  return names;
}

void read_cache_settings(Environment& env, std::vector<std::string>& problems) {
  const std::string cache = getenv_or_empty("KILN_CACHE");
  if (cache == "0" || cache == "1") {
    env.cache = cache == "1";
  } else if (!cache.empty()) {
    problems.push_back("KILN_CACHE='" + cache + "' is not 0 or 1; the disk cache stays on");
  }
  env.cache_dir = getenv_or_empty("KILN_CACHE_DIR");
  if (env.cache_dir.empty()) {
    const std::string xdg = getenv_or_empty("XDG_CACHE_HOME");
    const std::string home = getenv_or_empty("HOME");
    if (!xdg.empty() && xdg[0] == '/')
      env.cache_dir = xdg + "/kiln";
    else if (!home.empty())
      env.cache_dir = home + "/.cache/kiln";
  }
  const std::string max_mb = getenv_or_empty("KILN_CACHE_MAX_MB");
  if (!max_mb.empty()) {
    char* end = nullptr;
    const long long value = std::strtoll(max_mb.c_str(), &end, 10);
    if (*end == '\0' && value >= 1 && value <= (int64_t{1} << 40))
      env.cache_max_mb = value;
    else
      problems.push_back("KILN_CACHE_MAX_MB='" + max_mb +
                         "' is not a whole number of MB from 1 to 2^40; using " +
                         std::to_string(env.cache_max_mb));
  }
}

// Problems are only warned about: a typo in an environment variable must not stop a model.
Environment read_environment(std::vector<std::string>& problems) {
  Environment env;
  const std::string level = getenv_or_empty("KILN_LOG");
  if (level == "error")
    env.log_level = LogLevel::Error;
  else if (level == "warn" || level.empty())
    env.log_level = LogLevel::Warn;
  else if (level == "info")
    env.log_level = LogLevel::Info;
  else if (level == "debug")
    env.log_level = LogLevel::Debug;
  else
    problems.push_back("KILN_LOG='" + level + "' is not a level; use error, warn, info or debug");

  env.dump_dir = getenv_or_empty("KILN_DUMP_DIR");
  const std::string verify = getenv_or_empty("KILN_VERIFY");
  env.verify = !verify.empty() && verify != "0";

  env.disabled = names_in("KILN_DISABLE");
  for (const std::string& mode : names_in("KILN_DEBUG")) {
    if (mode == "bounds")
      env.check_bounds = true;
    else
      problems.push_back("KILN_DEBUG='" + mode + "' is not a debug mode; the one there is: bounds");
  }
  const std::string bf16 = getenv_or_empty("KILN_NATIVE_BF16");
  if (bf16 == "0" || bf16 == "1") {
    env.native_bf16 = bf16 == "1";
  } else if (!bf16.empty()) {
    problems.push_back("KILN_NATIVE_BF16='" + bf16 + "' is not 0 or 1; using what the CPU has");
  }
  read_cache_settings(env, problems);
  for (const std::string& feature : names_in("KILN_CPU_FEATURES")) {
    if (feature.size() > 1 && feature[0] == '-')
      env.cpu_features_off.insert(feature.substr(1));
    else
      problems.push_back("KILN_CPU_FEATURES='" + feature +
                         "' is not a removal; only '-name' is allowed (code for a feature the CPU "
                         "lacks would not run), so it is ignored");
  }
  return env;
}

}  // namespace

const Environment& environment() {
  static std::vector<std::string> problems;
  static const Environment env = read_environment(problems);
  static std::once_flag warned;
  // Written directly: log() would re-enter environment() while it is being set up.
  std::call_once(warned, [] {
    for (const auto& p : problems)
      std::cerr << "kiln: warning: " << p << "\n";
  });
  return env;
}

void log(LogLevel level, const std::string& message) {
  if (level > environment().log_level) return;
  static const char* names[] = {"error", "warning", "info", "debug"};
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::cerr << "kiln: " << names[static_cast<int>(level)] << ": " << message << "\n";
}

DebugClock::DebugClock(std::string prefix)
    : prefix_(std::move(prefix)), start_(std::chrono::steady_clock::now()) {}

void DebugClock::step(const std::string& what) const {
  if (environment().log_level < LogLevel::Debug) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  log(LogLevel::Debug, prefix_ + ": " + what + " after " + std::to_string(ms) + " ms");
}

}  // namespace kiln
