// Emits an elementwise kernel that transposes (schedule.h: transposes): its stores run along the
// innermost dim i, while a load runs along the next dim out, j, and strides along i (a
// channels-last conversion reads 16 floats 16 KB apart for every 16 it writes).
//
// Walked in its store order, such a load gathers one element from each of 16 lines, and lines a
// power of two apart share an L1 set, so the next gather finds them evicted: on a [2, 128, 64,
// 64] conversion to channels-last, 1.2 ms against 0.06 ms for a copy. Here the launch range is
// tiles of kTransposeTileRows rows of j, each with the whole of i: per block of W x W elements
// (W the vector width), the load reads W vectors along j (whole lines), a register transpose
// (W log2 W shuffles) turns them into W vectors along i, and the rest of the expression and the
// stores run at those W positions as in kernel_emitter.h. Partial tiles and the tail of i are
// walked as kernel_emitter.h walks a row (vectors whose transposed loads gather, then elements).
#pragma once

#include <llvm/IR/Module.h>

#include "backend/codegen/llvm/math.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// `kernel` must already be collapsed (collapse_dims) and transpose (schedule.h: transposes).
llvm::Function* emit_transpose_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                                      int vector_bits, MathTarget math);

}  // namespace kiln::codegen
