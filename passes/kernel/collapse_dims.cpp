#include "passes/kernel/collapse_dims.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "passes/kernel/size_terms.h"

namespace kiln::kernel {
namespace {

template <typename T>
void erase_at(std::vector<T>& v, int d) {
  if (!v.empty()) v.erase(v.begin() + d);  // term lists may be empty: every value constant
}

void erase_dim(Kernel& kernel, std::vector<IndexMap*>& maps, int d) {
  erase_at(kernel.sizes, d);
  erase_at(kernel.size_terms, d);
  for (IndexMap* m : maps) {
    erase_at(m->strides, d);
    erase_at(m->stride_terms, d);
  }
}

bool has_size_term(const Kernel& kernel, int d) {
  return !kernel.size_terms.empty() && kernel.size_terms[d].has_value();
}

void set_size(Kernel& kernel, int d, const SizeTerm& size) {
  kernel.sizes[d] = evaluate(size, kernel.size_inputs);
  std::optional<SizeTerm> field = as_field(size);
  if (field && kernel.size_terms.empty()) kernel.size_terms.resize(kernel.sizes.size());
  if (!kernel.size_terms.empty()) kernel.size_terms[d] = std::move(field);
}

// Puts the row dimensions in the memory order of the first output, outermost first (stable: ties
// keep their order), so that a channels-last or transposed output is written in runs and the
// merge below finds them. Reduced dimensions keep their order: it is the order of the sums. A
// size-generic output stride may be larger or smaller than another depending on the sizes: such a
// kernel keeps its order.
void order_rows_like_first_output(Kernel& kernel, std::vector<IndexMap*>& maps, int row_rank) {
  if (kernel.stores.empty() || row_rank < 2) return;
  const IndexMap& first = kernel.stores.front().map;
  if (std::any_of(first.stride_terms.begin(), first.stride_terms.end(),
                  [](const auto& t) { return t.has_value(); })) {
    return;
  }
  const std::vector<int64_t> strides = first.strides;
  std::vector<int> order(row_rank);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return std::abs(strides[a]) > std::abs(strides[b]); });
  if (std::is_sorted(order.begin(), order.end())) return;
  auto permute = [&](auto& v) {
    if (v.empty()) return;
    auto rows = v;
    for (int i = 0; i < row_rank; ++i)
      rows[i] = v[order[i]];
    std::copy(rows.begin(), rows.begin() + row_rank, v.begin());
  };
  permute(kernel.sizes);
  permute(kernel.size_terms);
  for (IndexMap* m : maps) {
    permute(m->strides);
    permute(m->stride_terms);
  }
}

}  // namespace

Kernel collapse_dims(const Kernel& original) {
  Kernel kernel = original;
  std::vector<IndexMap*> maps = accesses(kernel);
  int row_rank = kernel.row_rank();
  // Size-1 dimensions contribute nothing to any offset (keep one reduced dim if all are 1).
  for (int d = kernel.rank() - 1; d >= 0; --d) {
    const bool reduced = d >= row_rank;
    const int reduced_left = kernel.rank() - row_rank;
    // A dim of run-time size stays, whatever its example (0/1 is the plan's guard to make).
    if (kernel.sizes[d] != 1 || has_size_term(kernel, d) || (reduced && reduced_left == 1))
      continue;
    erase_dim(kernel, maps, d);
    if (!reduced) --row_rank;
  }
  order_rows_like_first_output(kernel, maps, row_rank);
  // Merge d into d+1 when every map walks them as one run, for every size where the kernel is
  // size-generic (the terms are equal, not only their example values).
  for (int d = kernel.rank() - 2; d >= 0; --d) {
    if ((d < row_rank) != (d + 1 < row_rank)) continue;
    const SizeTerm inner = size_term(kernel, d + 1);
    const bool mergeable = std::all_of(maps.begin(), maps.end(), [&](const IndexMap* m) {
      return stride_term(*m, d) == product(stride_term(*m, d + 1), inner);
    });
    const std::optional<SizeTerm> merged = product(inner, size_term(kernel, d));
    if (!mergeable || !merged) continue;
    set_size(kernel, d + 1, *merged);
    erase_dim(kernel, maps, d);
    if (d < row_rank) --row_rank;
  }
  if (kernel.sizes.empty()) {
    kernel.sizes = {1};
    kernel.size_terms.clear();
    for (IndexMap* m : maps) {
      m->strides = {0};
      m->stride_terms.clear();
    }
  }
  kernel.reduce_rank = original.reduce_rank == 0 ? 0 : kernel.rank() - row_rank;
  return kernel;
}

}  // namespace kiln::kernel
