// kiln's one error type. Header-only, so every layer of kiln throws it and every program that
// links kiln catches it, with one definition.
#pragma once

#include <stdexcept>
#include <string>

#include "kiln/export.h"

namespace kiln {

enum class ErrorKind {
  InvalidInput,  // the caller's mistake: a bad option, input or argument
  Unsupported,   // something kiln cannot compile; the executor falls back to eager for it
  Internal,      // a bug in kiln
  Backend,       // LLVM, NVRTC or CUDA failed; the tool's log is in the message
};

/// "invalid input", "unsupported", "internal", "backend".
inline const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidInput:
      return "invalid input";
    case ErrorKind::Unsupported:
      return "unsupported";
    case ErrorKind::Internal:
      return "internal";
    case ErrorKind::Backend:
      return "backend";
  }
  return "unknown";
}

// Exported (KILN_API): a program catches kiln::Error by its type, which must be one type on both
// sides of the library boundary.
class KILN_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(std::string("kiln (") + error_kind_name(kind) + "): " + message),
        kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace kiln
