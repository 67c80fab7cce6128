// When a kernel's output goes past the caches: streaming (non-temporal) stores skip the read
// each ordinary store of a new line costs and leave the caches to the inputs, but the next op
// then reads the output from memory. They pay off for outputs the caches would not keep anyway.
// Torch-free and LLVM-free.
#pragma once

#include <cstdint>

namespace kiln::codegen {

/// The least output size, in bytes, that streams: past the per-core caches, and so large that
/// with 4 KB pages the L3 keeps only part of it (the pages land unevenly in its sets).
inline constexpr int64_t kStreamBytes = 8 << 20;

/// The output size from which stores stream, for memory on huge pages or not and an L3 of
/// `l3_bytes` (0: unknown). On huge pages an output up to half the L3 stays there, next to the
/// inputs that produced it, for the op that reads it next: it is written with ordinary stores.
int64_t stream_bytes_for(bool huge_pages, int64_t l3_bytes);

/// Whether PyTorch's large CPU allocations are on transparent huge pages: the kernel's setting
/// is "always", or "madvise" with THP_MEM_ALLOC_ENABLE=1 (PyTorch then advises them).
bool tensors_on_huge_pages();

/// This host's L3 (the last level cache) in bytes; 0 when the system does not say.
int64_t host_l3_bytes();

/// stream_bytes_for this process's memory and host, found once.
int64_t host_stream_bytes();

}  // namespace kiln::codegen
