#include "backend/api/backend_payload.h"

#include <cstring>

#include "kiln/error.h"

namespace kiln {
namespace {

constexpr size_t kMagicBytes = kPayloadMagic.size() + 1;
constexpr size_t kHeaderBytes = kMagicBytes + sizeof(uint32_t);

}  // namespace

std::string encode_payload(std::string_view package) {
  std::string payload(kHeaderBytes, '\0');
  std::memcpy(payload.data(), kPayloadMagic.data(), kPayloadMagic.size());
  const uint32_t version = kPayloadVersion;
  std::memcpy(payload.data() + kMagicBytes, &version, sizeof(version));
  payload.append(package);
  return payload;
}

std::string_view decode_payload(std::string_view payload) {
  const std::string_view magic(kPayloadMagic.data(), kPayloadMagic.size());
  if (payload.size() < kHeaderBytes || payload.substr(0, magic.size()) != magic ||
      payload[magic.size()] != '\0') {
    throw Error(ErrorKind::InvalidInput,
                "the module's kiln backend payload has no kiln header (" +
                    std::to_string(payload.size()) +
                    " bytes): it was lowered by a kiln older than payload format 1, or is not "
                    "kiln's; lower the original module to kiln again");
  }
  uint32_t version = 0;
  std::memcpy(&version, payload.data() + kMagicBytes, sizeof(version));
  if (version != kPayloadVersion) {
    throw Error(ErrorKind::InvalidInput,
                "the module's kiln backend payload has format " + std::to_string(version) +
                    ", and this kiln reads format " + std::to_string(kPayloadVersion) +
                    "; lower the original module to kiln again with this kiln");
  }
  return payload.substr(kHeaderBytes);
}

}  // namespace kiln
