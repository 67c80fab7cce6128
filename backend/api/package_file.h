// The bytes of a package (kiln/kiln.h: save, load): named sections behind a header, and a
// checksum of everything before it. A file that is not a package, of another format version,
// truncated or corrupt is refused with a message that says which, never half-read.
//
// Layout (little-endian): "KILNPKG\0", u32 format version, u32 section count; per section u32
// name length, name, u64 length, u32 padding, that many zero bytes, then the bytes, which start at
// a multiple of 64 from the file's start (so a mapped package's weights are aligned); then the
// u64 checksum (passes/base/hash.h) of all that precedes it. Decoding returns views into the
// bytes given, which must outlive them. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace kiln {

struct PackageContents {
  std::string identity;          // jit::code_identity() where the code was made (empty: no code)
  std::string options;           // CompileOptions::to_string()
  std::string_view module;       // the TorchScript archive
  std::string signatures;        // the pickled input signatures to compile at load (package.cpp)
  int64_t grouping_threads = 1;  // jit::CodeBundle::grouping_threads
  /// By disk-cache key: code modules' object files and optimized graphs (graph_cache.h).
  std::map<std::string, std::string_view> entries;
};

inline constexpr uint32_t kPackageVersion = 1;

std::string encode_package(const PackageContents& contents);
/// Throws Error(InvalidInput) naming `path` and what is wrong with it.
PackageContents decode_package(std::string_view bytes, const std::string& path);
/// decode_package's checks but the checksum, which check_package_checksum makes: a load runs the
/// two at once, after check_package_header (the magic bytes and the format version, whose errors
/// come first). Nothing decoded may be trusted before the checksum is checked.
void check_package_header(std::string_view bytes, const std::string& path);
PackageContents decode_package_unchecked(std::string_view bytes, const std::string& path);
void check_package_checksum(std::string_view bytes, const std::string& path);

}  // namespace kiln
