#include "backend/cli/arguments.h"

#include <algorithm>

#include "passes/base/strings.h"

namespace kiln::cli {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), ::isdigit);
}

}  // namespace

const std::vector<std::string>& input_dtypes() {
  static const std::vector<std::string> dtypes = {"float32", "float64", "float16", "bfloat16",
                                                  "int64",   "int32",   "bool"};
  return dtypes;
}

std::string usage() {
  return "usage:\n"
         "  kiln explain MODEL.pt --input SHAPE[:DTYPE] [--input ...] [--json] [--options "
         "K=V,...]\n"
         "  kiln run MODEL.pt --input SHAPE[:DTYPE] [--input ...] [--iters N] [--options K=V,...]\n"
         "  kiln profile MODEL.pt --input SHAPE[:DTYPE] [--input ...] [--iters N] [--rows N] "
         "[--peers] [--json] [--options K=V,...]\n"
         "  kiln cache info|clear\n"
         "SHAPE is sizes joined by 'x' (1x3x224x224) or 'scalar'; DTYPE is one of: " +
         joined(input_dtypes()) + " (default float32); int=N passes the integer N\n";
}

InputSpec parse_input_spec(const std::string& text) {
  InputSpec spec;
  spec.text = text;
  if (text.rfind("int=", 0) == 0) {
    const std::string digits = text.substr(4);
    const bool negative = !digits.empty() && digits[0] == '-';
    if (!all_digits(negative ? digits.substr(1) : digits)) {
      throw UsageError("--input '" + text + "': int= needs an integer, e.g. int=3");
    }
    spec.is_int = true;
    spec.int_value = std::stoll(digits);
    return spec;
  }
  std::string shape = text;
  if (auto colon = text.find(':'); colon != std::string::npos) {
    shape = text.substr(0, colon);
    spec.dtype = text.substr(colon + 1);
    const auto& dtypes = input_dtypes();
    if (std::find(dtypes.begin(), dtypes.end(), spec.dtype) == dtypes.end()) {
      throw UsageError("--input '" + text + "': unknown dtype '" + spec.dtype +
                       "'; allowed: " + joined(dtypes));
    }
  }
  if (shape == "scalar") return spec;
  size_t start = 0;
  while (true) {
    const size_t x = shape.find('x', start);
    const std::string dim =
        shape.substr(start, x == std::string::npos ? std::string::npos : x - start);
    if (!all_digits(dim)) {
      throw UsageError("--input '" + text +
                       "': the shape must be sizes joined by 'x', e.g. 1x3x224x224, or 'scalar'");
    }
    spec.sizes.push_back(std::stoll(dim));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return spec;
}

Arguments parse_arguments(const std::vector<std::string>& args) {
  Arguments out;
  if (args.empty()) throw UsageError("no command given");
  out.command = args[0];
  if (out.command == "cache") {
    if (args.size() != 2 || (args[1] != "info" && args[1] != "clear"))
      throw UsageError("cache takes one action: info or clear");
    out.cache_action = args[1];
    return out;
  }
  if (out.command != "explain" && out.command != "run" && out.command != "profile") {
    throw UsageError("unknown command '" + out.command +
                     "'; allowed: explain, run, profile, cache");
  }
  auto value_of = [&](size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) throw UsageError(args[i] + " needs a value");
    return args[++i];
  };
  auto count_of = [&](size_t& i, int max) {
    const std::string& flag = args[i];
    const std::string& n = value_of(i);
    if (!all_digits(n) || std::stoll(n) < 1 || std::stoll(n) > max) {
      throw UsageError(flag + " '" + n + "': must be an integer from 1 to " + std::to_string(max));
    }
    return static_cast<int>(std::stoll(n));
  };
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--input") {
      out.inputs.push_back(parse_input_spec(value_of(i)));
    } else if (arg == "--iters") {
      out.iters = count_of(i, 1000000);
    } else if (arg == "--rows") {
      out.rows = count_of(i, 1000000);
    } else if (arg == "--peers") {
      out.peers = true;
    } else if (arg == "--json") {
      out.json = true;
    } else if (arg == "--options") {
      out.options = value_of(i);
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown flag '" + arg +
                       "'; allowed: --input, --iters, --json, --options, --rows, --peers");
    } else if (out.model.empty()) {
      out.model = arg;
    } else {
      throw UsageError("unexpected argument '" + arg + "' (the model is already '" + out.model +
                       "')");
    }
  }
  if (out.model.empty()) throw UsageError("no model file given");
  return out;
}

}  // namespace kiln::cli
