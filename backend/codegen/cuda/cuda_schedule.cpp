#include "backend/codegen/cuda/cuda_schedule.h"

#include <algorithm>
#include <cstdlib>

#include "passes/kernel/access_order.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::Expr;
using kernel::IndexMap;
using kernel::Kernel;
using kernel::Op;

std::vector<const IndexMap*> maps_of(const Kernel& kernel) {
  std::vector<const IndexMap*> maps;
  for (const Expr& e : kernel.exprs)
    if (e.op == Op::Load) maps.push_back(&e.map);
  for (const auto& s : kernel.stores)
    maps.push_back(&s.map);
  return maps;
}

/// The largest element offset any map reaches, plus one.
int64_t offset_extent(const Kernel& kernel) {
  int64_t extent = 1;
  for (const IndexMap* m : maps_of(kernel)) {
    int64_t reach = std::abs(m->offset);
    for (int d = 0; d < kernel.rank(); ++d)
      reach += std::max<int64_t>(kernel.sizes[d] - 1, 0) * std::abs(m->strides[d]);
    extent = std::max(extent, reach + 1);
  }
  return extent;
}

/// Elements per thread on the 16-byte path, or 1 when some access cannot take it: every map is
/// contiguous or constant along the innermost dimension, each output is stored once, and the
/// innermost size and every other stride of a contiguous map are multiples of the width.
int vector_width(const Kernel& kernel) {
  if (kernel.reduce_rank != 0) return 1;
  const int inner = kernel.rank() - 1;
  int64_t widest = 0;
  for (const IndexMap* m : maps_of(kernel)) {
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
  if (width < 2 || kernel.sizes[inner] % width != 0) return 1;
  for (const IndexMap* m : maps_of(kernel)) {
    if (m->strides[inner] != 1) continue;
    if (m->offset % width != 0) return 1;
    for (int d = 0; d < inner; ++d)
      if (m->strides[d] % width != 0) return 1;
  }
  return width;
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

CudaSchedule choose_cuda_schedule(const Kernel& kernel) {
  CudaSchedule s;
  int64_t numel = 1;
  for (int64_t size : kernel.sizes)
    numel *= size;
  s.index32 = offset_extent(kernel) < (int64_t{1} << 30) && numel < (int64_t{1} << 30);
  if (kernel.reduce_rank == 0) {
    s.vector = vector_width(kernel);
    s.block = kMaxBlock;
    s.blocks = (numel / s.vector + s.block - 1) / s.block;
    return s;
  }
  const int64_t rows = kernel.num_rows(), row = kernel.row_size();
  s.block = static_cast<int>(std::clamp<int64_t>((row + 31) / 32 * 32, 32, kMaxBlock));
  s.blocks = rows;
  const bool element_stores =
      std::any_of(kernel.stores.begin(), kernel.stores.end(),
                  [&](const auto& st) { return kernel::stores_per_element(kernel, st); });
  const int walks = count_reduces(kernel) + (element_stores ? 1 : 0);
  if (row > kSplitRowElements && rows < kSplitMaxRows) {
    s.slices = (row + kSplitSliceElements - 1) / kSplitSliceElements;
    s.blocks = rows * s.slices;
    s.phases = walks;
    s.workspace_bytes = workspace_counters_offset(kernel, s) + rows * 4;
  }
  if (s.slices == 1 && rows >= kAcrossRowsMinRows &&
      kernel::reduces_across_rows(kernel, kTileRows)) {
    s.across_rows = true;
    s.block = kMaxBlock;
    s.blocks = (rows + kTileRows - 1) / kTileRows;
    return s;
  }
  if (s.slices == 1 && walks > 1 && row <= int64_t{s.block} * kMaxCachedPerThread) {
    s.cached = static_cast<int>((row + s.block - 1) / s.block);
  }
  return s;
}

}  // namespace kiln::codegen::cuda
