// The checksum kiln's files carry (disk cache entries, packages): a check against accidents
// (truncation, disk corruption, a half-written file), not against an attacker.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln {

/// FNV-1a, 64-bit, over `bytes`, continuing from `seed` (the offset basis to start).
inline constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;
inline uint64_t fnv1a(std::string_view bytes, uint64_t seed = kFnvBasis) {
  uint64_t hash = seed;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace kiln
