#include "backend/api/shared_constants.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace kiln {
namespace {

using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

struct Entry {
  WeakTensor tensor;
};

// Never destroyed: a compile may still run while static objects are destroyed at exit.
struct Table {
  std::mutex mutex;
  std::unordered_multimap<uint64_t, Entry> entries;
  size_t sweep_at = 64;  // entries whose tensors died are dropped when the table reaches this
  int64_t shared_bytes = 0;
};

Table& table() {
  static Table* const instance = new Table;
  return *instance;
}

bool takes_part(const at::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.layout() != at::kStrided || t.is_sparse() ||
      !t.has_storage() || t.storage_offset() != 0 || !t.is_non_overlapping_and_dense())
    return false;
  const size_t bytes = t.nbytes();
  // Alone with the whole storage: no view of a weight, no slice of a larger buffer.
  return bytes >= kMinSharedConstantBytes && t.storage().nbytes() == bytes &&
         t.storage().use_count() == 1 && t.storage().data() != nullptr;
}

uint64_t mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
  return hash;
}

// The metadata and 64 words spread over the bytes: a key that finds the candidates, whose bytes
// are then compared in full (reading every byte of every folded weight to hash it would cost as
// much as the comparison, on every compile rather than only on a match).
uint64_t fingerprint(const at::Tensor& t) {
  uint64_t hash = mix(0, static_cast<uint64_t>(t.scalar_type()));
  for (int64_t size : t.sizes())
    hash = mix(hash, static_cast<uint64_t>(size));
  for (int64_t stride : t.strides())
    hash = mix(hash, static_cast<uint64_t>(stride));
  const auto* bytes = static_cast<const unsigned char*>(t.const_data_ptr());
  const size_t words = t.nbytes() / sizeof(uint64_t);
  constexpr size_t kSamples = 64;
  for (size_t i = 0; i < kSamples; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes + (i * (words - 1) / (kSamples - 1)) * sizeof(uint64_t), sizeof word);
    hash = mix(hash, word);
  }
  return hash;
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.nbytes()) == 0;
}

void sweep(Table& table) {
  for (auto it = table.entries.begin(); it != table.entries.end();) {
    it = it->second.tensor.expired() ? table.entries.erase(it) : std::next(it);
  }
  table.sweep_at = std::max<size_t>(64, 2 * table.entries.size());
}

}  // namespace

at::Tensor share_folded_constant(at::Tensor folded, c10::ArrayRef<at::Tensor> inputs) {
  if (!takes_part(folded)) return folded;
  for (const at::Tensor& input : inputs) {
    if (input.defined() && input.has_storage() && folded.is_alias_of(input)) return folded;
  }
  const uint64_t key = fingerprint(folded);
  Table& shared = table();
  std::lock_guard<std::mutex> lock(shared.mutex);
  auto [first, last] = shared.entries.equal_range(key);
  for (auto it = first; it != last; ++it) {
    c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> alive = it->second.tensor.lock();
    if (!alive) continue;
    at::Tensor earlier(std::move(alive));
    if (same_bytes(earlier, folded)) {
      shared.shared_bytes += static_cast<int64_t>(folded.nbytes());
      return earlier;
    }
  }
  if (shared.entries.size() >= shared.sweep_at) sweep(shared);
  shared.entries.emplace(key, Entry{WeakTensor(folded.getIntrusivePtr())});
  return folded;
}

int64_t shared_constant_bytes() {
  Table& shared = table();
  std::lock_guard<std::mutex> lock(shared.mutex);
  return shared.shared_bytes;
}

}  // namespace kiln
