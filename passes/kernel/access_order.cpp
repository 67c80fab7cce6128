#include "passes/kernel/access_order.h"

namespace kiln::kernel {

bool reduces_across_rows(const Kernel& kernel, int width, SizeGuards* guards) {
  if (kernel.reduce_rank == 0 || kernel.row_rank() == 0 || width < 2) return false;
  const int last_row = kernel.row_rank() - 1;
  if (!extent_at_least(kernel, Extent::Dim, width, guards, last_row)) return false;
  const std::vector<bool> element = element_levels(kernel);
  // Bytes that each order reads or writes contiguously. A map that does not move with the last
  // row dim is one broadcast value per step across rows, as cheap as a contiguous vector along
  // them: it does not count.
  int64_t along = 0, across = 0;
  auto count = [&](const IndexMap& map) {
    if (map.strides[last_row] == 0) return;
    const int64_t bytes = ir::dtype_size(kernel.buffers[map.buffer].dtype);
    if (map.strides.back() == 1) {
      along += bytes;
    } else if (map.strides[last_row] == 1) {
      across += bytes;
    }
  };
  for (size_t i = 0; i < kernel.exprs.size(); ++i)
    if (kernel.exprs[i].op == Op::Load && element[i]) count(kernel.exprs[i].map);
  for (const auto& store : kernel.stores)
    if (stores_per_element(kernel, store)) count(store.map);
  return across > along;
}

bool reads_one_vector_for_every_row(const Kernel& kernel) {
  if (kernel.reduce_rank == 0 || kernel.row_rank() == 0) return false;
  const int last_row = kernel.row_rank() - 1;
  const std::vector<bool> element = element_levels(kernel);
  bool invariant = false, moving = false;
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    if (kernel.exprs[i].op != Op::Load || !element[i]) continue;
    (kernel.exprs[i].map.strides[last_row] == 0 ? invariant : moving) = true;
  }
  return invariant && moving;
}

}  // namespace kiln::kernel
