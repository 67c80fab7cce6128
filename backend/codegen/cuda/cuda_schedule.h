// The CUDA schedule of a (collapsed) kernel: how threads map onto it. Torch-free and CUDA-free.
//
// Elementwise kernels: a grid-stride loop over the elements, `vector` of them per thread and step
// with 16-byte loads and stores where every contiguous buffer allows it (the kernel checks the
// pointers' alignment when it runs, and takes the one-element loop otherwise). Reducing kernels:
// one block per row (a grid-stride loop over rows), its threads striding over the row and
// combining with warp shuffles, then across warps through shared memory. Rows longer than
// kSplitRowElements, when there are too few rows to fill the device, are split: several blocks
// each reduce a slice into a workspace and the last block to finish a row combines the slices
// and runs the rest of the kernel for that row. A split kernel that walks its rows more than
// once (softmax: max, sum, then the stores) is launched once per walk ("phases", in stream
// order): each launch reduces every slice for one Reduce, whose combined value the last block of
// the row leaves in the workspace for the later launches; the last launch stores the elements of
// every slice. A row walked several times and short enough is kept in registers between the
// walks instead. A reduction whose neighbouring rows are neighbours in memory (x.sum(0), a
// channels-last pooling) gives neighbouring rows to neighbouring threads instead, so that loads
// and stores are coalesced ("across rows"). A size-generic kernel's rows take whole blocks and,
// walked more than once, the deepest row cache, whatever their length at the example binding:
// below the cache's reach (kMaxBlock * kMaxCachedPerThread) the row length then decides nothing,
// so one compile serves a stream of lengths.
#pragma once

#include <cstdint>

#include "passes/kernel/kernel.h"
#include "passes/kernel/size_guards.h"

namespace kiln::codegen::cuda {

inline constexpr int kMaxBlock = 256;
/// Above this many elements per row (and with fewer rows than kSplitMaxRows) a reduction is
/// split across blocks.
inline constexpr int64_t kSplitRowElements = 65536;
inline constexpr int64_t kSplitMaxRows = 64;
/// Across rows: rows per tile (one per lane of a warp), and the fewest rows for which the schedule
/// is used (4096 rows make 128 tiles, each a block; fewer would leave most of a GPU idle, and
/// one block per row, strided but many, is then the better choice).
inline constexpr int kTileRows = 32;
inline constexpr int64_t kAcrossRowsMinRows = 4096;
/// Most elements per thread a row cache holds (registers).
inline constexpr int kMaxCachedPerThread = 8;
/// Elements each block of a split reduction takes from its row.
inline constexpr int64_t kSplitSliceElements = 16384;

struct CudaSchedule {
  int block = kMaxBlock;  // threads per block, a multiple of 32
  /// Blocks the kernel can use; the runtime caps the grid (the loops stride over the rest).
  int64_t blocks = 0;
  int vector = 1;  // elements per thread per step on the 16-byte path (1: no such path)
  /// Reducing kernels that walk a row more than once (softmax: max, sum, then the stores) with
  /// at most kMaxCachedPerThread elements per thread: each thread keeps the elements it loads in
  /// registers, so the row is read from memory once. 0: not cached.
  int cached = 0;
  bool index32 = true;  // every index and offset fits in 32 bits
  /// Split reductions: slices per row, and the workspace the runtime provides (zeroed for each
  /// call, from the caching allocator: executor.cpp).
  int64_t slices = 1;
  int64_t workspace_bytes = 0;
  /// Launches per call, one per walk of a split row (its Reduces, then the element stores);
  /// launch p runs the function named phase_entry(entry, p).
  int phases = 1;
  /// Across rows: each block takes tiles of kTileRows neighbouring rows, lane l of every warp row
  /// l of the tile; the warps split each row's reduced elements between them and combine their
  /// partial results through shared memory in warp order. `blocks` counts tiles.
  bool across_rows = false;
  /// Every test of the kernel's extents these decisions made (kernel/size_guards.h): a kernel of
  /// the same structure whose extents pass them gets the same schedule, less `blocks` and
  /// `workspace_bytes`, which are functions of the sizes.
  kernel::SizeGuards guards;
  bool operator==(const CudaSchedule&) const = default;
};

/// The kernel's Reduce exprs (each one walk of a row).
int count_reduces(const kernel::Kernel& kernel);

/// Byte offsets in a split reduction's workspace: one accumulator (8 bytes) per row and slice,
/// then one combined accumulator per row and Reduce when there are several phases, then one
/// counter (4 bytes) per row.
int64_t workspace_results_offset(const kernel::Kernel& kernel, const CudaSchedule& schedule);
int64_t workspace_counters_offset(const kernel::Kernel& kernel, const CudaSchedule& schedule);

/// `kernel` must be collapsed (kernel/collapse_dims.h).
CudaSchedule choose_cuda_schedule(const kernel::Kernel& kernel);

/// CudaSchedule::blocks for `schedule` at `kernel`'s sizes: where a size-generic kernel's
/// schedule (taken at its example binding) launches at another binding, `kernel` bound there.
int64_t cuda_blocks(const kernel::Kernel& kernel, const CudaSchedule& schedule);

/// Bytes of one element of a buffer of `dtype` in memory.
int64_t storage_size(kernel::DType dtype);

}  // namespace kiln::codegen::cuda
