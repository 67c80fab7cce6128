// A kernel with its buffers declared, for the tests of the kernel IR, the interpreter and the code
// generators (torch-free).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::testing {

/// A kernel named `name` over `sizes` (the last `reduce_rank` reduced) whose buffers b0, b1, ...
/// have the dtypes `inputs`, then `outputs`; exprs and stores are for the caller to add.
inline kernel::Kernel make_kernel(std::string name, std::vector<int64_t> sizes, int reduce_rank,
                                  const std::vector<kernel::DType>& inputs,
                                  const std::vector<kernel::DType>& outputs) {
  kernel::Kernel k;
  k.name = std::move(name);
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  for (kernel::DType t : inputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, false});
  for (kernel::DType t : outputs)
    k.buffers.push_back({"b" + std::to_string(k.buffers.size()), t, true});
  return k;
}

}  // namespace kiln::testing
