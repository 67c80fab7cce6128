#include "kiln/options.h"

#include <algorithm>
#include <sstream>

#include "kiln/error.h"
#include "passes/base/strings.h"

namespace kiln {
namespace {

const std::vector<std::string> kModes = {"default", "reduce-overhead", "max-autotune",
                                         "max-autotune-no-cudagraphs"};
const std::vector<std::string> kTargets = {"auto", "cpu", "cuda"};
const std::vector<std::string> kPrecisions = {"fp32", "bf16"};

[[noreturn]] void bad_value(const std::string& key, const std::string& value,
                            const std::string& allowed) {
  throw Error(ErrorKind::InvalidInput,
              "bad value '" + value + "' for option '" + key + "'; allowed: " + allowed);
}

std::string one_of(const std::string& key, const std::string& value,
                   const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    bad_value(key, value, joined(allowed));
  }
  return value;
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1" || value == "True") return true;
  if (value == "false" || value == "0" || value == "False") return false;
  bad_value(key, value, "true, false");
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace

const char* target_name(Target target) {
  switch (target) {
    case Target::Auto:
      return "auto";
    case Target::CPU:
      return "cpu";
    case Target::CUDA:
      return "cuda";
  }
  return "auto";
}

const char* precision_name(Precision precision) {
  return precision == Precision::BF16 ? "bf16" : "fp32";
}

const std::vector<std::string>& CompileOptions::keys() {
  static const std::vector<std::string> keys = {
      "mode", "target", "strict", "fusion", "max_specializations", "precision", "dump_dir"};
  return keys;
}

void CompileOptions::set(const std::string& key, const std::string& value) {
  if (key == "mode") {
    mode = one_of(key, value, kModes);
  } else if (key == "target") {
    const auto name = one_of(key, value, kTargets);
    target = name == "cpu" ? Target::CPU : name == "cuda" ? Target::CUDA : Target::Auto;
  } else if (key == "strict") {
    strict = parse_bool(key, value);
  } else if (key == "fusion") {
    fusion = parse_bool(key, value);
  } else if (key == "max_specializations") {
    const bool digits =
        !value.empty() && value.size() <= 6 && std::all_of(value.begin(), value.end(), ::isdigit);
    if (!digits || std::stoi(value) < 1) bad_value(key, value, "an integer from 1 to 999999");
    max_specializations = std::stoi(value);
  } else if (key == "precision") {
    precision = one_of(key, value, kPrecisions) == "bf16" ? Precision::BF16 : Precision::FP32;
  } else if (key == "dump_dir") {
    dump_dir = value;
  } else {
    throw Error(ErrorKind::InvalidInput,
                "unknown option '" + key + "'; valid options: " + joined(keys()));
  }
}

CompileOptions CompileOptions::parse(const std::string& text) {
  CompileOptions options;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw Error(ErrorKind::InvalidInput, "option '" + item +
                                               "' has no value; write key=value, e.g. "
                                               "\"mode=default,strict=true\"");
    }
    options.set(trim(item.substr(0, eq)), trim(item.substr(eq + 1)));
  }
  return options;
}

CompileOptions CompileOptions::from_map(const std::map<std::string, std::string>& values) {
  CompileOptions options;
  for (const auto& [key, value] : values)
    options.set(key, value);
  return options;
}

std::string CompileOptions::to_string() const {
  std::ostringstream out;
  out << "mode=" << mode << ",target=" << target_name(target)
      << ",strict=" << (strict ? "true" : "false") << ",fusion=" << (fusion ? "true" : "false")
      << ",max_specializations=" << max_specializations
      << ",precision=" << precision_name(precision);
  if (!dump_dir.empty()) out << ",dump_dir=" << dump_dir;
  return out.str();
}

}  // namespace kiln
