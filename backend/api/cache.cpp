#include "kiln/cache.h"

#include <cstdio>

#include "backend/api/introspection.h"

#ifdef KILN_HAVE_LLVM
#include "runtime/jit/disk_cache.h"
#endif

namespace kiln {

std::string CacheInfo::to_text() const {
  std::string text = "dir: " + (dir.empty() ? std::string("(none)") : dir) + "\n";
  if (!enabled) return text + "off: " + why_disabled + "\n";
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, " (%.1f MB of %.0f MB)\n",
                static_cast<double>(bytes) / (1 << 20), static_cast<double>(max_bytes) / (1 << 20));
  return text + "entries: " + std::to_string(entries) + sizes;
}

CacheInfo cache_info() {
  CacheInfo info;
#ifdef KILN_HAVE_LLVM
  jit::DiskCache& cache = jit::DiskCache::instance();
  info.dir = cache.dir();
  info.enabled = cache.enabled();
  info.why_disabled = cache.why_disabled();
  info.max_bytes = cache.max_bytes();
  const jit::DiskCache::Usage usage = cache.usage();
  info.entries = usage.entries;
  info.bytes = usage.bytes;
#else
  info.why_disabled = "this kiln was built without LLVM: it compiles no CPU code to keep";
#endif
  return info;
}

void clear_cache() {
#ifdef KILN_HAVE_LLVM
  jit::DiskCache::instance().clear();
#endif
}

std::optional<std::string> load_cache_entry(const std::string& key) {
#ifdef KILN_HAVE_LLVM
  return jit::DiskCache::instance().get(key);
#else
  (void)key;
  return std::nullopt;
#endif
}

void store_cache_entry(const std::string& key, std::string_view bytes) {
#ifdef KILN_HAVE_LLVM
  jit::DiskCache::instance().put(key, bytes);
#else
  (void)key;
  (void)bytes;
#endif
}

}  // namespace kiln
