#include "backend/codegen/cuda/cuda_schedule.h"

#include <algorithm>
#include <cstdlib>

#include "passes/kernel/access_order.h"
#include "passes/kernel/size_terms.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::Expr;
using kernel::extent_at_least;
using kernel::extent_multiple_of;
using kernel::IndexMap;
using kernel::Kernel;
using kernel::Op;

using kernel::Extent;
using kernel::SizeGuards;

/// Elements per thread on the 16-byte path, or 1 when some access cannot take it: every map is
/// contiguous or constant along the innermost dimension, each output is stored once, and the
/// innermost size and every other stride and the offset of a contiguous map are multiples of the
/// width.
int vector_width(const Kernel& kernel, SizeGuards* guards) {
  if (kernel.reduce_rank != 0) return 1;
  const int inner = kernel.rank() - 1;
  const std::vector<const IndexMap*> maps = kernel::accesses(kernel);
  int64_t widest = 0;
  for (const IndexMap* m : maps) {
    if (m->strides[inner] == 1) {
      widest = std::max(widest, storage_size(kernel.buffers[m->buffer].dtype));
    } else if (m->strides[inner] != 0) {
      return 1;
    }
  }
  for (const auto& s : kernel.stores) {
    if (s.map.strides[inner] != 1) return 1;
    const auto stores_to = [&](const auto& other) { return other.map.buffer == s.map.buffer; };
    if (std::count_if(kernel.stores.begin(), kernel.stores.end(), stores_to) != 1) return 1;
  }
  if (widest == 0) return 1;
  const int width = static_cast<int>(16 / widest);
  if (width < 2 || !extent_multiple_of(kernel, Extent::Dim, width, guards, inner)) return 1;
  for (size_t a = 0; a < maps.size(); ++a) {
    if (maps[a]->strides[inner] != 1) continue;
    const int access = static_cast<int>(a);
    if (!extent_multiple_of(kernel, Extent::Offset, width, guards, 0, access)) return 1;
    for (int d = 0; d < inner; ++d)
      if (!extent_multiple_of(kernel, Extent::Stride, width, guards, d, access)) return 1;
  }
  return width;
}

/// Threads per block for rows of `row` elements: the row rounded up to a warp, at most
/// kMaxBlock; the guards pin the row to the range that rounds the same.
int block_for(const Kernel& kernel, SizeGuards* guards) {
  const int64_t row = kernel.row_size();
  const int64_t full = kMaxBlock - 31;  // the shortest row that takes a whole block
  if (extent_at_least(kernel, Extent::RowSize, full, guards)) return kMaxBlock;
  const int64_t block = std::max<int64_t>((row + 31) / 32 * 32, 32);
  if (block > 32) extent_at_least(kernel, Extent::RowSize, block - 31, guards);
  extent_at_least(kernel, Extent::RowSize, block + 1, guards);
  return static_cast<int>(block);
}

}  // namespace

int count_reduces(const Kernel& kernel) {
  return static_cast<int>(std::count_if(kernel.exprs.begin(), kernel.exprs.end(),
                                        [](const Expr& e) { return e.op == Op::Reduce; }));
}

int64_t storage_size(kernel::DType dtype) {
  return ir::dtype_size(dtype);
}

int64_t workspace_results_offset(const Kernel& kernel, const CudaSchedule& schedule) {
  return kernel.num_rows() * schedule.slices * 8;
}

int64_t workspace_counters_offset(const Kernel& kernel, const CudaSchedule& schedule) {
  const int64_t results = schedule.phases > 1 ? kernel.num_rows() * count_reduces(kernel) * 8 : 0;
  return workspace_results_offset(kernel, schedule) + results;
}

int64_t cuda_blocks(const Kernel& kernel, const CudaSchedule& schedule) {
  if (kernel.reduce_rank == 0) {
    const int64_t steps = kernel::extent_value(kernel, Extent::Elements) / schedule.vector;
    return (steps + schedule.block - 1) / schedule.block;
  }
  if (schedule.across_rows) return (kernel.num_rows() + kTileRows - 1) / kTileRows;
  return kernel.num_rows() * schedule.slices;
}

CudaSchedule choose_cuda_schedule(const Kernel& kernel) {
  CudaSchedule s;
  // A size-generic kernel serves every row length of its class: whole blocks and, for rows
  // walked more than once, the deepest row cache, so that no row length up to the cache's reach
  // makes a class of its own (a short row leaves threads idle; one compile serves them all).
  const bool generic = kernel::is_size_generic(kernel);
  SizeGuards* guards = &s.guards;
  constexpr int64_t k32 = int64_t{1} << 30;
  s.index32 = !extent_at_least(kernel, Extent::Reach, k32, guards) &&
              !extent_at_least(kernel, Extent::Elements, k32, guards);
  if (kernel.reduce_rank == 0) {
    s.vector = vector_width(kernel, guards);
    s.block = kMaxBlock;
    s.blocks = cuda_blocks(kernel, s);
    return s;
  }
  const int64_t rows = kernel.num_rows(), row = kernel.row_size();
  s.block = generic ? kMaxBlock : block_for(kernel, guards);
  s.blocks = rows;
  const bool element_stores =
      std::any_of(kernel.stores.begin(), kernel.stores.end(),
                  [&](const auto& st) { return kernel::stores_per_element(kernel, st); });
  const int walks = count_reduces(kernel) + (element_stores ? 1 : 0);
  if (extent_at_least(kernel, Extent::RowSize, kSplitRowElements + 1, guards) &&
      !extent_at_least(kernel, Extent::Rows, kSplitMaxRows, guards)) {
    s.slices = (row + kSplitSliceElements - 1) / kSplitSliceElements;
    kernel::record_range(kernel, Extent::RowSize, (s.slices - 1) * kSplitSliceElements + 1,
                         s.slices * kSplitSliceElements + 1, guards);
    s.blocks = cuda_blocks(kernel, s);
    s.phases = walks;
    s.workspace_bytes = workspace_counters_offset(kernel, s) + rows * 4;
  }
  if (s.slices == 1 && extent_at_least(kernel, Extent::Rows, kAcrossRowsMinRows, guards) &&
      kernel::reduces_across_rows(kernel, kTileRows, guards)) {
    s.across_rows = true;
    s.block = kMaxBlock;
    s.blocks = cuda_blocks(kernel, s);
    return s;
  }
  if (s.slices == 1 && walks > 1 &&
      !extent_at_least(kernel, Extent::RowSize, int64_t{s.block} * kMaxCachedPerThread + 1,
                       guards)) {
    if (generic) {
      s.cached = kMaxCachedPerThread;
    } else {
      s.cached = static_cast<int>((row + s.block - 1) / s.block);
      kernel::record_range(kernel, Extent::RowSize, int64_t{s.cached - 1} * s.block + 1,
                           int64_t{s.cached} * s.block + 1, guards);
    }
  }
  return s;
}

}  // namespace kiln::codegen::cuda
