// The graph IR's own error types. passes/ knows nothing of kiln::Error (it lives in the API
// layer); the API converts these at its boundary: ParseError is the caller's mistake,
// VerifyError after a pass is a kiln bug.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln::ir {

class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class VerifyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kiln::ir
