#include "runtime/cuda/dynamic_library.h"

#include <dlfcn.h>

namespace kiln::cuda {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& candidates) {
  for (const std::string& candidate : candidates) {
    handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) {
      path_ = candidate;
      error_.clear();
      return;
    }
    const char* why = dlerror();
    error_ += (error_.empty() ? "" : "; ") + std::string(why ? why : candidate + ": not found");
  }
}

DynamicLibrary::~DynamicLibrary() {
  // Left open on purpose: CUDA libraries do not like being unloaded while a context lives, and
  // each is opened once per process.
}

void* DynamicLibrary::symbol(const char* name) {
  if (!handle_) return nullptr;
  void* address = dlsym(handle_, name);
  if (!address) error_ = path_ + " has no " + name;
  return address;
}

}  // namespace kiln::cuda
