// Compiled code kept on disk between processes: what one process compiled, the next one loads
// instead of compiling again (docs/disk-cache.md).
//
// Threat model. Entries are native code that kiln maps and runs, trusted like a shared library
// in a directory only the user can write. Hence the checks when the cache opens: the directory
// must belong to the user (its owner is the effective uid) and be writable by nobody else, or
// the cache is off, with one warning. Each entry carries its length and a hash of its bytes,
// checked on every read: that catches truncation, disk corruption and accidents (a half-written
// file, another format version), not an attacker who already holds the user's rights.
//
// Writers write an entry whole to a file of their own and rename it into place, so a reader sees
// an old entry, a new one or none, and processes compiling the same thing replace each other's
// identical bytes without waiting on one another. A read that finds a bad entry deletes it and
// reports a miss, logged once per process. Past the size cap the least recently used entries go
// (their modification time, touched on every hit). Torch-free and LLVM-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit {

class DiskCache {
 public:
  /// The process's cache, as KILN_CACHE, KILN_CACHE_DIR and KILN_CACHE_MAX_MB set it.
  static DiskCache& instance();
  /// instance() if something opened it already, else null (a caller that only reads counts
  /// does not create the directory).
  static DiskCache* opened();

  /// A cache in `dir` (created, mode 0700, where missing) holding at most `max_bytes`; off,
  /// with why_disabled() saying why, when the directory is unusable or not the user's alone, or
  /// when `off_because` says why (then nothing on disk is touched).
  DiskCache(std::string dir, int64_t max_bytes, std::string off_because = {});

  bool enabled() const { return why_disabled_.empty(); }
  /// Empty when enabled.
  const std::string& why_disabled() const { return why_disabled_; }
  const std::string& dir() const { return dir_; }
  int64_t max_bytes() const { return max_bytes_; }

  /// The bytes stored under `key` (lowercase hex), or nothing: no such entry, or one rejected
  /// (and deleted) because it is truncated, corrupt, of another format or another key's.
  std::optional<std::string> get(const std::string& key);
  /// The same, read in place: the entry's file mapped into memory (64-byte aligned), checked,
  /// and unmapped when the last copy of the pointer goes. Costs no copy of a large entry.
  std::shared_ptr<const std::string_view> map(const std::string& key);
  void put(const std::string& key, std::string_view bytes);
  /// Stores the concatenation of `parts` (written one after another, never joined in memory).
  void put(const std::string& key, const std::vector<std::string_view>& parts);
  /// Deletes `key`'s entry: bytes that passed the checks but could not be used.
  void remove(const std::string& key);

  struct Usage {
    int64_t entries = 0;
    int64_t bytes = 0;  // on disk, headers included
  };
  Usage usage() const;
  /// Deletes every entry (and any temporary file a killed writer left).
  void clear();

  struct Counts {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t rejected = 0;  // of the misses, entries found bad and deleted
    int64_t writes = 0;
  };
  Counts counts() const;

  /// Bumped when the entry header or the meaning of a key changes: older entries then read as
  /// another format and are replaced.
  static constexpr uint32_t kFormatVersion = 2;

 private:
  std::string entry_path(const std::string& key) const;
  void reject(const std::string& path, const std::string& why);
  /// Deletes least recently used entries until the cache is under its cap.
  void evict();

  std::string dir_;
  std::string objects_;  // dir_/objects: the entries
  int64_t max_bytes_;
  std::string why_disabled_;
  std::atomic<int64_t> hits_ = 0, misses_ = 0, rejected_ = 0, writes_ = 0;
  std::atomic<bool> warned_ = false;
};

}  // namespace kiln::jit
