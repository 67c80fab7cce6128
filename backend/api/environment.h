// Every environment switch kiln reads, in one place, read once per process.
//
//   KILN_LOG=error|warn|info|debug   how much kiln writes to stderr (default warn)
//   KILN_DUMP_DIR=DIR                write the captured graphs and the graph IR after each pass
//   KILN_VERIFY=1                    run the IR verifier after every pass
//   KILN_DISABLE=a,b                 turn off passes or features by name (see disable_names())
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kiln {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

struct Environment {
  LogLevel log_level = LogLevel::Warn;
  std::string dump_dir;
  bool verify = false;
  std::set<std::string> disabled;
};

const Environment& environment();

/// The names KILN_DISABLE accepts: the pipeline's passes and the features "freeze_weights",
/// "fusion", "llvm", "kernel_cache" and "cuda".
std::vector<std::string> disable_names();

/// Writes "kiln: <level>: message" to stderr when `level` is enabled by KILN_LOG.
void log(LogLevel level, const std::string& message);

}  // namespace kiln
