#include "passes/ir/attr.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln::ir {
namespace {

// Doubles always print with a '.', an exponent, or as inf/nan, so the parser can tell them from
// integers; 17 significant digits round-trip exactly.
std::string double_string(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename F>
std::string list_string(const std::vector<T>& items, F item_string) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? "," : "") + item_string(items[i]);
  return out + "]";
}

}  // namespace

std::string attr_string(const Attr& attr) {
  struct Visitor {
    std::string operator()(const NoneAttr&) const { return "None"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return double_string(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return quoted(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return list_string(v, [](int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const std::vector<double>& v) const {
      return list_string(v, double_string);
    }
    std::string operator()(const std::vector<bool>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i)
        out += (i ? "," : "") + std::string(v[i] ? "true" : "false");
      return out + "]";
    }
  };
  return std::visit(Visitor{}, attr);
}

}  // namespace kiln::ir
