#include "passes/kernel/collapse_dims.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace kiln::kernel {
namespace {

// Every index map of the kernel, loads and stores alike.
std::vector<IndexMap*> maps_of(Kernel& kernel) {
  std::vector<IndexMap*> maps;
  for (auto& e : kernel.exprs)
    if (e.op == Op::Load) maps.push_back(&e.map);
  for (auto& s : kernel.stores)
    maps.push_back(&s.map);
  return maps;
}

void erase_dim(Kernel& kernel, std::vector<IndexMap*>& maps, int d) {
  kernel.sizes.erase(kernel.sizes.begin() + d);
  for (IndexMap* m : maps)
    m->strides.erase(m->strides.begin() + d);
}

// Puts the row dimensions in the memory order of the first output, outermost first (stable: ties
// keep their order), so that a channels-last or transposed output is written in runs and the
// merge below finds them. Reduced dimensions keep their order: it is the order of the sums.
void order_rows_like_first_output(Kernel& kernel, std::vector<IndexMap*>& maps, int row_rank) {
  if (kernel.stores.empty() || row_rank < 2) return;
  const std::vector<int64_t> strides = kernel.stores.front().map.strides;
  std::vector<int> order(row_rank);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return std::abs(strides[a]) > std::abs(strides[b]); });
  if (std::is_sorted(order.begin(), order.end())) return;
  auto permute = [&](std::vector<int64_t>& v) {
    std::vector<int64_t> rows(row_rank);
    for (int i = 0; i < row_rank; ++i)
      rows[i] = v[order[i]];
    std::copy(rows.begin(), rows.end(), v.begin());
  };
  permute(kernel.sizes);
  for (IndexMap* m : maps)
    permute(m->strides);
}

}  // namespace

Kernel collapse_dims(const Kernel& original) {
  Kernel kernel = original;
  std::vector<IndexMap*> maps = maps_of(kernel);
  int row_rank = kernel.row_rank();
  // Size-1 dimensions contribute nothing to any offset (keep one reduced dim if all are 1).
  for (int d = kernel.rank() - 1; d >= 0; --d) {
    const bool reduced = d >= row_rank;
    const int reduced_left = kernel.rank() - row_rank;
    if (kernel.sizes[d] != 1 || (reduced && reduced_left == 1)) continue;
    erase_dim(kernel, maps, d);
    if (!reduced) --row_rank;
  }
  order_rows_like_first_output(kernel, maps, row_rank);
  // Merge d into d+1 when every map walks them as one run.
  for (int d = kernel.rank() - 2; d >= 0; --d) {
    if ((d < row_rank) != (d + 1 < row_rank)) continue;
    const int64_t inner = kernel.sizes[d + 1];
    const bool mergeable = std::all_of(maps.begin(), maps.end(), [&](const IndexMap* m) {
      return m->strides[d] == m->strides[d + 1] * inner;
    });
    if (!mergeable) continue;
    kernel.sizes[d + 1] *= kernel.sizes[d];
    erase_dim(kernel, maps, d);
    if (d < row_rank) --row_rank;
  }
  if (kernel.sizes.empty()) {
    kernel.sizes = {1};
    for (IndexMap* m : maps)
      m->strides = {0};
  }
  kernel.reduce_rank = original.reduce_rank == 0 ? 0 : kernel.rank() - row_rank;
  return kernel;
}

}  // namespace kiln::kernel
