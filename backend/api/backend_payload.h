// The payload kiln's TorchScript backend (jit_backend.cpp) stores in a lowered module: a header
// (magic bytes and a format version), then the module as a package (package_file.h). A payload
// written by a kiln with another format, or by something else, is refused with a message saying
// so, never misread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr std::string_view kPayloadMagic = "KILNPAY";  // 7 bytes and a NUL
inline constexpr uint32_t kPayloadVersion = 2;

/// `package` behind the current header.
std::string encode_payload(std::string_view package);

/// The package of a payload encode_payload wrote; throws Error(InvalidInput) naming what is wrong
/// (not kiln's, another format version, truncated).
std::string_view decode_payload(std::string_view payload);

}  // namespace kiln
