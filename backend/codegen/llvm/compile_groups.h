// A plan's fresh kernels compiled on several threads: LLVM's O3 pipeline and code generation
// take most of a plan's compile time (0.85 s of 1.05 s for EfficientNet-B0's 83 kernels), and
// each kernel is its own function, so the kernels split into modules that compile at the same
// time (the JIT compiles modules added from several threads concurrently: orc_jit.h).
// Torch-free and LLVM-free.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// Fewer kernels than this per module are not worth a module (and a thread) of their own.
inline constexpr size_t kMinKernelsPerModule = 4;

/// `kernels` split into at most `threads` groups (indices into `kernels`, in order within each
/// group) of about equal work, each of at least kMinKernelsPerModule kernels where there are
/// enough; one group for few kernels or one thread.
std::vector<std::vector<size_t>> compile_groups(const std::vector<kernel::Kernel>& kernels,
                                                int threads);

/// Runs work(0) .. work(n - 1), each on a thread of its own except work(0), which runs on the
/// calling thread; returns when all have. The first exception any of them threw is rethrown.
void run_concurrently(size_t n, const std::function<void(size_t)>& work);

}  // namespace kiln::codegen
