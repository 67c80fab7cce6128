// split_reductions: the reductions the target splits into pieces that threads share.
//
// A full reduction (one row: x.sum(), ((a - b) ** 2).mean()) walked by one thread leaves the
// others idle; rows side by side in memory, split between threads, give each thread a slice of
// every stretch of memory. The target says into how many pieces it splits such a kernel (the code
// generator's reduction_pieces: on the CPU, pieces of at least a parallel grain's work, at most
// 256); the pass records the count on the kernel (Kernel::split_pieces), where the kernel cache
// and the dumps see it, and the code generator performs the split (kernel/split_reduction.h: a
// partial kernel over the pieces, then a finish). Targets that split rows their own way (CUDA's
// slices) answer 0. Runs after lower_kernels.
//
//   kernel k [16777216] reduce 1      ->   kernel k [16777216] reduce 1 split 256
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln {

/// Sets each kernel's split_pieces to `pieces(kernel)`; returns how many kernels are split.
int split_reductions(std::vector<kernel::Kernel>& kernels,
                     const std::function<int64_t(const kernel::Kernel&)>& pieces);

}  // namespace kiln
