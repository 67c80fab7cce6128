// JSON string literals for the reports kiln writes by hand (explain, profile).
#pragma once

#include <iomanip>
#include <sstream>
#include <string>

namespace kiln {

/// `s` as a quoted JSON string, escaped.
inline std::string json_string(const std::string& s) {
  std::ostringstream out;
  out << '"';
  for (char c : s) {
    if (c == '"' || c == '\\')
      out << '\\' << c;
    else if (c == '\n')
      out << "\\n";
    else if (static_cast<unsigned char>(c) < 0x20)
      out << "\\u" << std::hex << std::setw(4) << std::setfill('0') << int(c) << std::dec;
    else
      out << c;
  }
  out << '"';
  return out.str();
}

}  // namespace kiln
