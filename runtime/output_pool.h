// Memory for the large tensors a plan hands out (kernel outputs, input copies), reused from call
// to call without going back to the OS.
//
// glibc serves blocks above its mmap threshold (at most 32 MB) with mmap and unmaps them on free,
// and trims the heap's top when it frees above the trim threshold: a fresh large output every
// call then costs a page fault per 4 KiB page written, which for a 64 MB output takes longer
// than the kernel that writes it. The pool keeps the blocks the callers freed and hands them out
// again, already mapped. It changes nothing process-wide (no mallopt).
//
// A block returns to the pool when its storage dies, i.e. when the last tensor or view over it
// is gone, on whichever thread that happens. Storages made here are resizable (resize_ takes a
// new block from the pool and returns the old one), as ATen's own are.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>

#include "passes/ir/types.h"

namespace kiln {

/// Blocks at least this large come from the pool; smaller ones from ATen's allocator.
inline constexpr size_t kPooledBytes = size_t{1} << 20;
/// Freed blocks the pool keeps, in bytes; past it the oldest go back to the system.
inline constexpr size_t kPoolCapacityBytes = size_t{512} << 20;

/// An uninitialized CPU tensor of `type`, its storage from the pool when it is large.
at::Tensor pooled_empty(const ir::TensorType& type);

/// The pool's allocator (for tests: what it holds, what it handed out).
c10::Allocator* output_pool();
size_t output_pool_free_bytes();

}  // namespace kiln
