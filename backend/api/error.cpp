#include "kiln/error.h"

namespace kiln {

const char* error_kind_name(ErrorKind kind) {
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

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string("kiln (") + error_kind_name(kind) + "): " + message),
      kind_(kind) {}

}  // namespace kiln
