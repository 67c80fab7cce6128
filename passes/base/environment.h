// Every environment variable kiln reads, in one place, read once per process, and the log they
// control.
//
//   KILN_LOG=error|warn|info|debug   how much kiln writes to stderr (default warn)
//   KILN_DUMP_DIR=DIR                write the captured graphs and the graph IR after each pass
//   KILN_VERIFY=1                    run the IR verifier after every pass
//   KILN_DISABLE=a,b                 turn off passes or features by name
//   KILN_DEBUG=bounds                checked runs: kernel buffers between guard bands, poisoned
//                                    (runtime/bounds_check.h)
//   KILN_NATIVE_BF16=0|1             treat the CPU as lacking (0) or having (1) native bf16,
//                                    whatever it has (tests of precision=bf16's fallback)
//   KILN_CACHE=0                     no disk cache of compiled code (runtime/jit/disk_cache.h)
//   KILN_CACHE_DIR=DIR               where it is (default $XDG_CACHE_HOME/kiln, ~/.cache/kiln)
//   KILN_CACHE_MAX_MB=N              its size cap (default 1024)
//
// KILN_DISABLE's names are the pipeline's passes and the driver's features, which this bottom
// layer cannot know: it keeps the names as given, and the driver checks them
// (backend/api/environment.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace kiln {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

struct Environment {
  LogLevel log_level = LogLevel::Warn;
  std::string dump_dir;
  bool verify = false;
  std::set<std::string> disabled;   // as given; unknown names are warned about by the driver
  bool check_bounds = false;        // KILN_DEBUG=bounds
  std::optional<bool> native_bf16;  // KILN_NATIVE_BF16; unset: what the CPU has
  bool cache = true;                // KILN_CACHE (0: off)
  std::string cache_dir;            // KILN_CACHE_DIR, else the per-user default
  int64_t cache_max_mb = 1024;      // KILN_CACHE_MAX_MB
  /// KILN_CPU_FEATURES: CPU features kiln's generated code must not use ("avx512f", ...), as if
  /// the CPU lacked them. Only removals: code for a feature the CPU lacks would not run.
  std::set<std::string> cpu_features_off;
};

const Environment& environment();

/// Writes "kiln: <level>: message" to stderr when `level` is enabled by KILN_LOG.
void log(LogLevel level, const std::string& message);

/// The steps of one compile or load, timed with KILN_LOG=debug: step("x") logs
/// "<prefix>: x after N ms" (since the clock was made).
class DebugClock {
 public:
  explicit DebugClock(std::string prefix);
  void step(const std::string& what) const;

 private:
  std::string prefix_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace kiln
