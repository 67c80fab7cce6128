#include "runtime/jit/code_bundle.h"

namespace kiln::jit {
namespace {

thread_local CodeBundle* in_use = nullptr;

}  // namespace

void CodeBundle::add(const std::string& key, std::string_view object) {
  std::lock_guard lock(mutex_);
  if (!objects_.contains(key)) objects_[key] = std::make_shared<const std::string>(object);
}

void CodeBundle::add(const std::string& key, std::shared_ptr<const std::string> object) {
  std::lock_guard lock(mutex_);
  objects_.try_emplace(key, std::move(object));
}

std::shared_ptr<const std::string> CodeBundle::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(key);
  return found == objects_.end() ? nullptr : found->second;
}

std::map<std::string, std::shared_ptr<const std::string>> CodeBundle::entries() const {
  std::lock_guard lock(mutex_);
  return objects_;
}

size_t CodeBundle::size() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
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
