// The specializations of one compiled object, keyed by input signature: the cache both the
// compiled module (whole-graph specializations) and each region runner (compiled plans) keep.
//
// A signature seen for the first time is compiled by the first thread that sees it, outside the
// cache's lock: calls with signatures already compiled go on running meanwhile, and other
// threads that bring the same new signature wait for that one compile instead of starting their
// own. A compile that throws leaves nothing behind; the next call with that signature tries
// again.
#pragma once

#include <future>
#include <memory>
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
      std::shared_future<void> compiled;
      {
        std::shared_lock lock(mutex_);
        if (auto found = entries_.find(key); found != entries_.end()) {
          if (found->second.value) return found->second.value;
          compiled = found->second.compiled;
        }
      }
      if (compiled.valid()) {
        // Another thread compiles this signature: wait for it, then look again (its compile may
        // have thrown, and left the signature to this thread).
        compiled.wait();
        continue;
      }
      std::promise<void> done;
      int index = 0;
      {
        std::unique_lock lock(mutex_);
        if (entries_.contains(key)) continue;
        if (static_cast<int>(entries_.size()) >= limit) {
          lock.unlock();
          return past_limit();
        }
        index = static_cast<int>(entries_.size());
        entries_.emplace(key, Entry{nullptr, done.get_future().share()});
      }
      Ptr value;
      try {
        value = compile(index);
      } catch (...) {
        publish(key, nullptr);
        done.set_value();
        throw;
      }
      publish(key, value);
      done.set_value();
      return value;
    }
  }

  /// The compiled value for `key`, or null (none, or still compiling).
  Ptr find(const SignatureKey& key) const {
    std::shared_lock lock(mutex_);
    auto found = entries_.find(key);
    return found == entries_.end() ? nullptr : found->second.value;
  }

  /// Replaces the value for `key` (which calls with that signature get from now on).
  void put(const SignatureKey& key, Ptr value) {
    std::unique_lock lock(mutex_);
    entries_[key] = Entry{std::move(value), {}};
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
    Ptr value;                          // null while compiling
    std::shared_future<void> compiled;  // ready when the compiling thread is done
  };

  /// The compile of `key` ended: its value, or (null: it threw) no entry. An entry that another
  /// call replaced meanwhile (put) stays as it is.
  void publish(const SignatureKey& key, Ptr value) {
    std::unique_lock lock(mutex_);
    auto found = entries_.find(key);
    if (found == entries_.end() || found->second.value) return;
    if (value)
      found->second = Entry{std::move(value), {}};
    else
      entries_.erase(found);
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<SignatureKey, Entry, SignatureHash> entries_;
};

}  // namespace kiln
