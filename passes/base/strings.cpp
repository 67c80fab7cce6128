#include "passes/base/strings.h"

namespace kiln {

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace kiln
