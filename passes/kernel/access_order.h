// Which way a reducing kernel's memory accesses run: along its rows (the reduced elements of
// a row are neighbours in memory: softmax over the last dim) or across them (neighbouring rows
// are neighbours in memory: x.sum(0) of a row-major x). Target-neutral: the CPU code generator
// vectorizes across rows in that case, the CUDA one gives neighbouring rows to neighbouring
// threads.
#pragma once

#include "passes/kernel/kernel.h"
#include "passes/kernel/size_guards.h"

namespace kiln::kernel {

/// True when the kernel's element loads and stores move through memory with the last row
/// dimension (stride 1 there) and not with the last reduced one, counted in bytes; a map that
/// does not move with the last row dim (a batch-1 linear's input row) does not count. False for
/// elementwise kernels and when the last row dimension has fewer than `width` rows. `kernel`
/// must be collapsed (collapse_dims.h). The size it compares is recorded in `guards` when given.
bool reduces_across_rows(const Kernel& kernel, int width, SizeGuards* guards = nullptr);

/// True when one of the kernel's element loads does not move with the last row dimension while
/// another does: a vector against a matrix, every row a dot product of the same vector (a linear
/// of a few rows computed as a contraction). `kernel` must be collapsed.
bool reads_one_vector_for_every_row(const Kernel& kernel);

}  // namespace kiln::kernel
