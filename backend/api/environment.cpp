#include "backend/api/environment.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include "passes/pipeline.h"

namespace kiln {
namespace {

std::string getenv_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ", ") + item;
  return out;
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

  const auto valid = disable_names();
  std::stringstream list(getenv_or_empty("KILN_DISABLE"));
  for (std::string name; std::getline(list, name, ',');) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty()) continue;
    if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
      problems.push_back("KILN_DISABLE names '" + name +
                         "', which is not one of: " + joined(valid));
    } else {
      env.disabled.insert(name);
    }
  }
  return env;
}

}  // namespace

std::vector<std::string> disable_names() {
  std::vector<std::string> names = pipeline_pass_names();
  names.push_back("freeze_weights");  // torch.compile inference: weights as constants
  names.push_back("fusion");
  names.push_back("llvm");
  names.push_back("kernel_cache");      // reuse of kernels earlier plans compiled (kernel_cache.h)
  names.push_back("one_pass_moments");  // a mean and its variance in one pass (moments.h)
  names.push_back("split_reductions");  // full reductions shared by threads (split_reduction.h)
  names.push_back("cuda");              // CUDA code generation (CUDA ops then run through ATen)
  return names;
}

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

}  // namespace kiln
