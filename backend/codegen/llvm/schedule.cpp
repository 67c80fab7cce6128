#include "backend/codegen/llvm/schedule.h"

#include <algorithm>

namespace kiln::codegen {

using kernel::Kernel;

KernelLaunch choose_launch(const Kernel& kernel) {
  if (kernel.reduce_rank == 0) {
    int64_t numel = 1;
    for (int64_t s : kernel.sizes)
      numel *= s;
    return {numel, kParallelGrainElements};
  }
  const int64_t row = std::max<int64_t>(kernel.row_size(), 1);
  return {kernel.num_rows(), std::max<int64_t>(1, kParallelGrainElements / row)};
}

int vector_bits_for(const std::string& features) {
  auto has = [&](const std::string& f) {
    return ("," + features + ",").find("," + f + ",") != std::string::npos;
  };
  if (has("+avx512f")) return 512;
  if (has("+avx2") || has("+avx")) return 256;
  return 128;
}

}  // namespace kiln::codegen
