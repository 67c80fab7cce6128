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

#include "backend/codegen/llvm/cpu_schedule.h"
#include "backend/codegen/llvm/math.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// `kernel` must already be collapsed (collapse_dims); `schedule` is its schedule
/// (cpu_schedule.h), which the emitters follow: the strategy picks the emitter, and with it the
/// vector width, streaming stores, row passes, unroll, chunks, prefetches and row caches.
llvm::Function* emit_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                            const CpuSchedule& schedule, MathTarget math);

/// `collapsed` less what the emitted code does not depend on given its schedule: the outermost
/// size (set to -1), unless the emitters read it (a reduction across rows, a two-dim transposing
/// kernel, a kernel whose only dims are reduced). Kernels with equal keys and equal schedules
/// (schedule_key) compile to the same code; the launch range carries the size. A decoding step's
/// layer norm over [tokens, 768] is one code for every number of tokens (kernel_cache.h).
kernel::Kernel code_key(const kernel::Kernel& collapsed, const CpuSchedule& schedule);

}  // namespace kiln::codegen
