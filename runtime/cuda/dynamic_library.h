// A shared library opened at run time (dlopen), so kiln builds and runs where the CUDA toolkit and
// driver are absent and only needs them when a CUDA kernel is asked for.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

class DynamicLibrary {
 public:
  /// Tries `candidates` in order (names for the loader's search path, or full paths). On failure
  /// is_open() is false and error() lists what each attempt said.
  explicit DynamicLibrary(const std::vector<std::string>& candidates);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool is_open() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

  /// The symbol, or nullptr (and error() says which one was missing).
  void* symbol(const char* name);

  template <typename Function>
  bool bind(Function*& function, const char* name) {
    function = reinterpret_cast<Function*>(symbol(name));
    return function != nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string path_;
  std::string error_;
};

}  // namespace kiln::cuda
