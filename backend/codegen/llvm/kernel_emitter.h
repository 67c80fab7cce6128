// Emits one kernel as an LLVM function  void name(void* const* buffers, i64 begin, i64 end)
// that computes the part [begin, end) of its launch range (see schedule.h): elements for an
// elementwise kernel, rows for a reducing one.
//
// Loops are explicit: a vector loop of `vector_bits` wide operations over the innermost
// dimension, then a scalar loop for the tail. A reducing kernel walks each row once per
// reduction (rows are small enough to stay in cache) and once more for element-level stores;
// row-level values are computed in between, once per row. A reduction whose rows are columns in
// memory is vectorized across rows instead (across_rows_emitter.h).
#pragma once

#include <llvm/IR/Module.h>

#include "backend/codegen/llvm/math.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// `kernel` must already be collapsed (collapse_dims). An output of `stream_bytes` or more is
/// written with streaming stores (store_policy.h); a mean and its variance share one pass over
/// each row when `one_pass_moments` allows (moments.h).
llvm::Function* emit_kernel(llvm::Module& module, const kernel::Kernel& kernel, int vector_bits,
                            MathTarget math, int64_t stream_bytes, bool one_pass_moments = true);

/// `collapsed` less what emit_kernel's code does not depend on: the outermost size (set to -1)
/// of a kernel smaller than any streaming or prefetching threshold, unless that size is a
/// reduced one or the kernel is vectorized across rows. Kernels with equal keys compile to the
/// same code; the launch range (schedule.h) carries the size. A decoding step's layer norm over
/// [tokens, 768] is one code for every number of tokens (kernel_cache.h).
kernel::Kernel code_key(const kernel::Kernel& collapsed, int vector_bits);

}  // namespace kiln::codegen
