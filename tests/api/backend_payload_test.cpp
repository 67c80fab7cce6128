// The kiln TorchScript backend's payload header: what another format or a foreign payload gets.
#include "backend/api/backend_payload.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kiln/error.h"

namespace kiln {
namespace {

// The message of the error decode_payload throws, or "" when it accepts the payload.
std::string refusal(const std::string& payload) {
  try {
    decode_payload(payload);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

TEST(BackendPayload, TheArchiveComesBackWhole) {
  const std::string archive("PK\x03\x04 a zip archive\0with a NUL", 30);
  EXPECT_EQ(decode_payload(encode_payload(archive)), archive);
  EXPECT_EQ(decode_payload(encode_payload("")), "");
}

TEST(BackendPayload, APayloadWithoutTheHeaderIsRefused) {
  // What a kiln before the header stored: the bare TorchScript archive.
  EXPECT_NE(refusal("PK\x03\x04...").find("no kiln header"), std::string::npos);
  EXPECT_NE(refusal("").find("no kiln header (0 bytes)"), std::string::npos);
  EXPECT_NE(refusal(encode_payload("x").substr(0, 5)).find("no kiln header"), std::string::npos);
}

TEST(BackendPayload, AnotherFormatVersionIsRefusedByNumber) {
  std::string payload = encode_payload("archive");
  const uint32_t future = kPayloadVersion + 1;
  std::memcpy(payload.data() + kPayloadMagic.size() + 1, &future, sizeof(future));
  const std::string message = refusal(payload);
  EXPECT_NE(message.find("format " + std::to_string(future)), std::string::npos) << message;
  EXPECT_NE(message.find("reads format " + std::to_string(kPayloadVersion)), std::string::npos);
}

}  // namespace
}  // namespace kiln
