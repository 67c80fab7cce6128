// String helpers shared by every layer: the lists kiln's messages quote, and views of bytes that
// keep what they live in alive.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/base/export.h"

namespace kiln {

/// `view` as a shared pointer that keeps `owner`, what its bytes live in (a string, a mapped
/// file), alive as long as any copy of the pointer is.
inline std::shared_ptr<const std::string_view> shared_view(std::shared_ptr<const void> owner,
                                                           std::string_view view) {
  struct Held {
    std::shared_ptr<const void> owner;
    std::string_view view;
  };
  auto held = std::make_shared<const Held>(Held{std::move(owner), view});
  return {held, &held->view};
}

/// "a, b, c" (items joined by `separator`).
KILN_INTERNAL std::string joined(const std::vector<std::string>& items,
                                 const std::string& separator = ", ");

}  // namespace kiln
