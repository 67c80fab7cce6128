// The checksum kiln's files carry (disk cache entries, packages): a check against accidents
// (truncation, disk corruption, a half-written file), not against an attacker.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln {

/// FNV-1a's 64-bit step over 8-byte words in four independent lanes, then the tail byte by byte
/// and the length: a 100 MB entry of packed weights is checked in a few milliseconds, where
/// byte-wise FNV-1a takes about 0.1 s. Fed in pieces or at once, the same bytes give the same
/// value. Stable across runs and builds on one endianness.
class Checksum {
 public:
  Checksum& update(std::string_view bytes) {
    length_ += bytes.size();
    const char* data = bytes.data();
    size_t left = bytes.size();
    if (pending_ > 0) {
      const size_t take = std::min(kBlock - pending_, left);
      std::memcpy(buffer_ + pending_, data, take);
      pending_ += take;
      data += take;
      left -= take;
      if (pending_ < kBlock) return *this;
      block(buffer_);
      pending_ = 0;
    }
    for (; left >= kBlock; data += kBlock, left -= kBlock)
      block(data);
    std::memcpy(buffer_, data, left);
    pending_ = left;
    return *this;
  }

  uint64_t value() const {
    uint64_t hash = lanes_[0];
    for (int lane = 1; lane < 4; ++lane)
      hash = (hash ^ lanes_[lane]) * kPrime;
    for (size_t i = 0; i < pending_; ++i)
      hash = (hash ^ static_cast<unsigned char>(buffer_[i])) * kPrime;
    return (hash ^ length_) * kPrime;
  }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  static constexpr size_t kBlock = 32;

  void block(const char* data) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t word;
      std::memcpy(&word, data + 8 * lane, sizeof word);
      lanes_[lane] = (lanes_[lane] ^ word) * kPrime;
      lanes_[lane] ^= lanes_[lane] >> 29;
    }
  }

  uint64_t lanes_[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
                        0xc2b2ae3d27d4eb4full};
  char buffer_[kBlock] = {};
  size_t pending_ = 0;
  uint64_t length_ = 0;
};

inline uint64_t checksum(std::string_view bytes) {
  return Checksum().update(bytes).value();
}

}  // namespace kiln
