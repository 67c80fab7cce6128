// Command-line parsing for the `kiln` tool, kept apart from torch so it is quick to test.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::cli {

/// A bad command line: the message says what was wrong and what is allowed.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct InputSpec {
  std::vector<int64_t> sizes;
  std::string dtype = "float32";
  /// `int=N`: a plain integer argument instead of a tensor.
  bool is_int = false;
  int64_t int_value = 0;
  std::string text;  // as given on the command line
};

struct Arguments {
  std::string command;       // "explain", "run", "profile" or "cache"
  std::string cache_action;  // cache: "info" or "clear"
  std::string model;
  std::vector<InputSpec> inputs;
  int iters = 20;
  bool json = false;
  std::string options;  // "key=value,..." for CompileOptions::parse
  int rows = 25;        // profile: the slowest steps shown
  bool peers = false;   // profile: OpenVINO and ONNX Runtime side by side
};

/// "1x3x224x224", "8:int64", "scalar:float64", "int=3". Throws UsageError.
InputSpec parse_input_spec(const std::string& text);
/// argv without the program name. Throws UsageError.
Arguments parse_arguments(const std::vector<std::string>& args);
std::string usage();
const std::vector<std::string>& input_dtypes();

}  // namespace kiln::cli
