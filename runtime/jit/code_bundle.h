// Compiled entries carried with a compiled module instead of a cache: what a package
// (backend/api/package.h) holds. Its entries are keyed as the disk cache's are: code modules'
// object files, and optimized graphs (backend/api/graph_cache.h). While a bundle is in use on a
// thread, the JIT (OrcJit::add) links a module whose key the bundle has from the bundle's bytes,
// the graph cache takes a graph from it the same way, and both add to the bundle every entry
// they make or load from the disk cache. So one replay of a module's compiles fills a bundle,
// and a replay in another process with that bundle compiles nothing. Torch-free and LLVM-free.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace kiln::jit {

class CodeBundle {
 public:
  /// `grouping_threads`: the thread count compiles under this bundle group their kernels into
  /// modules for (compile_groups.h), whatever the process's; a module's key depends on which
  /// kernels it holds, so a replay that groups otherwise would miss.
  explicit CodeBundle(int grouping_threads) : grouping_threads_(grouping_threads) {}

  int grouping_threads() const { return grouping_threads_; }
  /// An entry's bytes; the pointer owns what they live in (a string, a mapped package).
  using Entry = std::shared_ptr<const std::string_view>;

  /// Keeps a copy of `bytes` under `key`, unless the bundle holds that key already.
  void add(const std::string& key, std::string_view bytes);
  /// Keeps `entry` itself (no copy), unless the bundle holds that key already.
  void add(const std::string& key, Entry entry);
  /// The entry stored under `key`, or null.
  Entry find(const std::string& key) const;
  /// Every key and its entry, in key order.
  std::map<std::string, Entry> entries() const;
  size_t size() const;

 private:
  const int grouping_threads_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

/// The bundle in use on this thread, or null.
CodeBundle* code_bundle_in_use();

/// Puts `bundle` in use on this thread for the scope's lifetime (null: none), restoring the one
/// in use before. Threads a compile starts take over their starter's (compile_groups.cpp).
class UseCodeBundle {
 public:
  explicit UseCodeBundle(CodeBundle* bundle);
  ~UseCodeBundle();
  UseCodeBundle(const UseCodeBundle&) = delete;
  UseCodeBundle& operator=(const UseCodeBundle&) = delete;

 private:
  CodeBundle* previous_;
};

}  // namespace kiln::jit
