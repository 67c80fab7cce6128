// Emits a reducing kernel vectorized across its rows (schedule.h: reduces_across_rows), with the
// same signature and launch range as kernel_emitter.h's: [begin, end) is a range of rows.
//
// Rows are walked by runs of the last row dimension; each block of neighbouring rows is one
// vector position along it (4 vectors wide, then 1, then single rows), so every row-level value
// is a vector with one lane per row. The reduced dimensions are walked one element at a time
// with contiguous loads: no gathers and no horizontal sums.
#pragma once

#include <llvm/IR/Module.h>

#include "backend/codegen/llvm/math.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// `kernel` must already be collapsed (collapse_dims). `sum_chunk`: a float sum adds each row's
/// elements in chunks of this many (CpuSchedule::sum_chunk; 0: one after another).
llvm::Function* emit_across_rows_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                                        int vector_bits, MathTarget math, int64_t sum_chunk);

}  // namespace kiln::codegen
