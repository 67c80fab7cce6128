// The bytes of a package: what is written reads back, and what is damaged is refused, saying how.
#include "backend/api/package_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kiln/error.h"
#include "passes/base/hash.h"

namespace kiln {
namespace {

PackageContents sample() {
  PackageContents contents;
  contents.identity = "kiln object 1\nx86_64\ncpu\n+avx2\nllvm 19\nbuild\n";
  contents.options = "mode=default";
  contents.module = std::string_view("PK\0\3archive", 11);
  contents.signatures = "pickled";
  contents.grouping_threads = 2;
  contents.entries["0123"] = "object code";
  return contents;
}

std::string refusal(const std::string& bytes) {
  try {
    decode_package(bytes, "m.kiln");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

// The checksum recomputed, so that the damage inside gets past it.
std::string resealed(std::string bytes) {
  bytes.resize(bytes.size() - sizeof(uint64_t));
  const uint64_t hash = checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&hash), sizeof hash);
  return bytes;
}

TEST(PackageFileTest, WhatIsWrittenReadsBack) {
  const PackageContents read = decode_package(encode_package(sample()), "m.kiln");
  EXPECT_EQ(read.identity, sample().identity);
  EXPECT_EQ(read.options, "mode=default");
  EXPECT_EQ(read.module, sample().module);
  EXPECT_EQ(read.signatures, "pickled");
  EXPECT_EQ(read.grouping_threads, 2);
  ASSERT_EQ(read.entries.size(), 1u);
  EXPECT_EQ(read.entries.at("0123"), "object code");
}

TEST(PackageFileTest, DamagedOrForeignBytesAreRefusedSayingHow) {
  const std::string bytes = encode_package(sample());
  EXPECT_NE(refusal("PK\3\4 a zip file").find("not a kiln package"), std::string::npos);
  EXPECT_NE(refusal(bytes.substr(0, bytes.size() - 3)).find("truncated or corrupt"),
            std::string::npos);
  std::string flipped = bytes;
  flipped[40] ^= 1;
  EXPECT_NE(refusal(flipped).find("checksum"), std::string::npos);
  std::string other_version = bytes;
  other_version[8] = 7;
  EXPECT_NE(refusal(other_version).find("package format 7"), std::string::npos);
  // Sections that run past the end, or that this kiln does not know, even with a good checksum.
  std::string renamed = bytes;
  const size_t at = renamed.find("options");
  renamed.replace(at, 7, "optionz");
  EXPECT_NE(refusal(resealed(renamed)).find("section 'optionz'"), std::string::npos);
  std::string long_section = bytes;
  long_section[16 + 4 + 8 + 5] = 0x7f;  // a high byte of the identity section's length
  EXPECT_NE(refusal(resealed(long_section)).find("truncated"), std::string::npos);
  EXPECT_EQ(refusal(bytes), "");
}

}  // namespace
}  // namespace kiln
