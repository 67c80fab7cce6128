#include "backend/codegen/llvm/schedule.h"

#include <algorithm>

namespace kiln::codegen {

using kernel::Kernel;
using kernel::Op;

int64_t element_cost(const Kernel& kernel) {
  const std::vector<bool> element = kernel::element_levels(kernel);
  int64_t cost = 1;
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    switch (kernel.exprs[i].op) {
      case Op::Exp:
      case Op::Log:
      case Op::Tanh:
      case Op::Erf:
      case Op::Sigmoid:
      case Op::Pow:
        // Row-level ones run once per row: no cost per element.
        if (element[i]) cost += kTranscendentalCost;
        break;
      default:
        break;
    }
  }
  return cost;
}

KernelLaunch choose_launch(const Kernel& kernel) {
  const int64_t grain_elements =
      std::max<int64_t>(1, kParallelGrainElements / element_cost(kernel));
  if (kernel.reduce_rank == 0) {
    int64_t numel = 1;
    for (int64_t s : kernel.sizes)
      numel *= s;
    return {numel, grain_elements};
  }
  const int64_t row = std::max<int64_t>(kernel.row_size(), 1);
  return {kernel.num_rows(), std::max<int64_t>(1, grain_elements / row)};
}

bool has_feature(const std::string& features, const std::string& feature) {
  return ("," + features + ",").find("," + feature + ",") != std::string::npos;
}

int vector_bits_for(const std::string& features) {
  if (has_feature(features, "+avx512f")) return 512;
  if (has_feature(features, "+avx2") || has_feature(features, "+avx")) return 256;
  return 128;
}

}  // namespace kiln::codegen
