#include "passes/split_reductions.h"

namespace kiln {

int split_reductions(std::vector<kernel::Kernel>& kernels,
                     const std::function<int64_t(const kernel::Kernel&)>& pieces) {
  int split = 0;
  for (kernel::Kernel& k : kernels) {
    k.split_pieces = pieces(k);
    split += k.split_pieces > 0;
  }
  return split;
}

}  // namespace kiln
