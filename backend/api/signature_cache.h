// The specializations of one compiled object, keyed by input signature: the cache both the
// compiled module (whole-graph specializations) and each region runner (compiled plans) keep.
//
// A signature seen for the first time is compiled by the first thread that sees it, outside the
// cache's lock: calls with signatures already compiled go on running meanwhile, and other
// threads that bring the same new signature wait for that one compile instead of starting their
// own. A compile that throws leaves nothing behind; the next call with that signature tries
// again.
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <utility>

#include "backend/api/signature.h"

namespace kiln {

template <class Value>
class SignatureCache {
 public:
  using Ptr = std::shared_ptr<const Value>;

  /// The value for `key`: the cached one, or `compile(index)` (index: how many signatures were
  /// cached before this one), cached. When `limit` signatures are cached already, `past_limit()`,
  /// which is not cached.
  template <class Compile, class PastLimit>
  Ptr get(const SignatureKey& key, int limit, Compile&& compile, PastLimit&& past_limit) {
    for (;;) {
      std::shared_ptr<std::mutex> compiling;
      {
        std::shared_lock lock(mutex_);
        if (auto found = entries_.find(key); found != entries_.end()) {
          if (found->second.value) return found->second.value;
          compiling = found->second.compiling;
        }
      }
      if (compiling) {
        // Another thread compiles this signature: wait for it, then look again (its compile may
        // have thrown, and left the signature to this thread).
        std::lock_guard wait(*compiling);
        continue;
      }
      std::unique_lock lock(mutex_);
      if (entries_.contains(key)) continue;
      if (static_cast<int>(entries_.size()) >= limit) {
        lock.unlock();
        return past_limit();
      }
      const int index = static_cast<int>(entries_.size());
      compiling = std::make_shared<std::mutex>();
      // Locked before the entry is visible, so a thread that finds it waits.
      std::unique_lock mine(*compiling);
      entries_.emplace(key, Entry{nullptr, compiling});
      lock.unlock();
      Ptr value;
      try {
        value = compile(index);
      } catch (...) {
        std::unique_lock relock(mutex_);
        erase_if_pending(key, compiling);
        throw;
      }
      std::unique_lock relock(mutex_);
      if (auto found = entries_.find(key);
          found != entries_.end() && found->second.compiling == compiling) {
        found->second = Entry{value, nullptr};
      }
      return value;
    }
  }

  /// Replaces the value for `key` (which calls with that signature get from now on).
  void put(const SignatureKey& key, Ptr value) {
    std::unique_lock lock(mutex_);
    entries_[key] = Entry{std::move(value), nullptr};
  }

  /// Drops the compiled values `drop` returns true for (values still compiling stay).
  template <class Predicate>
  void erase_if(Predicate&& drop) {
    std::unique_lock lock(mutex_);
    std::erase_if(entries_, [&](const auto& entry) {
      return entry.second.value && drop(*entry.second.value);
    });
  }

  /// Signatures cached or compiling.
  int size() const {
    std::shared_lock lock(mutex_);
    return static_cast<int>(entries_.size());
  }

 private:
  struct Entry {
    Ptr value;                              // null while compiling
    std::shared_ptr<std::mutex> compiling;  // held by the compiling thread
  };

  void erase_if_pending(const SignatureKey& key, const std::shared_ptr<std::mutex>& compiling) {
    if (auto found = entries_.find(key);
        found != entries_.end() && found->second.compiling == compiling) {
      entries_.erase(found);
    }
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<SignatureKey, Entry, SignatureHash> entries_;
};

}  // namespace kiln
