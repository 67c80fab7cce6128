#include "runtime/parallel.h"

#include <ATen/Parallel.h>

namespace kiln {

void run_parallel(int64_t range, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end)>& body) {
  if (range <= 0) return;
  if (range <= grain) {
    body(0, range);
    return;
  }
  at::parallel_for(0, range, grain, body);
}

}  // namespace kiln
