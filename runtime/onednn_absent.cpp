// Built in place of runtime/onednn/ where kiln is built without its own oneDNN
// (KILN_WITH_ONEDNN=OFF): nothing multiplies in bf16.
#include "runtime/onednn_support.h"

namespace kiln {

bool onednn_native_bf16() {
  return false;
}

}  // namespace kiln
