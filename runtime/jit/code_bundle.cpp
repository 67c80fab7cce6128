#include "runtime/jit/code_bundle.h"

#include "passes/base/strings.h"

namespace kiln::jit {
namespace {

thread_local CodeBundle* in_use = nullptr;

}  // namespace

void CodeBundle::add(const std::string& key, std::string_view bytes) {
  {
    std::lock_guard lock(mutex_);
    if (entries_.contains(key)) return;
  }
  auto copy = std::make_shared<const std::string>(bytes);
  add(key, shared_view(copy, *copy));
}

void CodeBundle::add(const std::string& key, Entry entry) {
  std::lock_guard lock(mutex_);
  entries_.try_emplace(key, std::move(entry));
}

CodeBundle::Entry CodeBundle::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(key);
  return found == entries_.end() ? nullptr : found->second;
}

std::map<std::string, CodeBundle::Entry> CodeBundle::entries() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

size_t CodeBundle::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

CodeBundle* code_bundle_in_use() {
  return in_use;
}

UseCodeBundle::UseCodeBundle(CodeBundle* bundle) : previous_(in_use) {
  in_use = bundle;
}

UseCodeBundle::~UseCodeBundle() {
  in_use = previous_;
}

}  // namespace kiln::jit
