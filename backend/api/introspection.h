// What kiln's Python extension asks of the library besides compiling: the pass pipeline, the
// operators kiln generates kernels for, and whether it can generate CUDA kernels here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "passes/base/export.h"

namespace kiln {

/// The pass pipeline in order; each name works in KILN_DISABLE.
KILN_INTERNAL std::vector<std::string> pass_names();

/// The operators kiln generates kernels for ("aten::add.Tensor", ...).
KILN_INTERNAL std::vector<std::string> native_ops();

struct CudaStatus {
  std::string nvrtc_library;       // the NVRTC library in use ("" when none loads)
  int nvrtc_version = 0;           // major * 1000 + minor * 10
  std::string unavailable_reason;  // why kiln cannot generate CUDA kernels ("" when it can)
};
KILN_INTERNAL CudaStatus cuda_status();

/// This build of kiln's library (its GNU build ID): what Python keys its own disk-cache entries
/// by (kiln/_aot_cache.py), as the disk cache keys code by it.
KILN_INTERNAL std::string build_id();

/// The disk cache's entry under `key` (32 lowercase hex digits) for kiln's Python side, checked
/// as every entry is; nothing when there is none, it was bad, or the cache is off.
KILN_INTERNAL std::optional<std::string> load_cache_entry(const std::string& key);
/// Stores `bytes` under `key` (atomically; nothing when the cache is off).
KILN_INTERNAL void store_cache_entry(const std::string& key, std::string_view bytes);

}  // namespace kiln
