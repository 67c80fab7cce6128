// Files read in place: disk-cache entries and packages are mapped into memory, and the tensors
// in them become views of the mapping, with no copy.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace kiln {

/// The `length` bytes of the file open at `fd`, mapped private and writable (whoever writes a
/// page writes its own copy of it, never the file), unmapped when the last copy of the pointer
/// goes; null, errno set, where it cannot be mapped. The caller may close `fd` at once.
///
/// Pages fault in as they are first read. Not MAP_POPULATE: on a writable private mapping it
/// copies every page up front (~0.5 ms per MB), where pages faulted in by reading are the page
/// cache's own (a checksum over a mapped file costs ~0.15 ms per MB, faults included).
std::shared_ptr<const std::string_view> map_private(int fd, size_t length);

}  // namespace kiln
