// kiln's one error type.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

enum class ErrorKind {
  InvalidInput,  // the caller's mistake: a bad option, input or argument
  Unsupported,   // something kiln cannot compile; the executor falls back to eager for it
  Internal,      // a bug in kiln
  Backend,       // LLVM, NVRTC or CUDA failed; the tool's log is in the message
};

/// "invalid input", "unsupported", "internal", "backend".
const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace kiln
