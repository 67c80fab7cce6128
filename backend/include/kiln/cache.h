// The disk cache of compiled code, shared by both frontends and every process of the user
// (KILN_CACHE, KILN_CACHE_DIR, KILN_CACHE_MAX_MB; docs/disk-cache.md).
#pragma once

#include <cstdint>
#include <string>

#include "kiln/export.h"

namespace kiln {

struct CacheInfo {
  std::string dir;
  bool enabled = false;
  std::string why_disabled;  // empty when enabled
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t max_bytes = 0;

  /// "dir: ...\nentries: N (X MB of Y MB)" or why it is off, for `kiln cache info`.
  KILN_API std::string to_text() const;
};

/// Where the cache is, whether it is on, and what it holds now.
KILN_API CacheInfo cache_info();
/// Deletes every entry (the next compiles store them again).
KILN_API void clear_cache();

}  // namespace kiln
