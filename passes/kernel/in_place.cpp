#include "passes/kernel/in_place.h"

namespace kiln::kernel {
namespace {

bool same_map(const IndexMap& a, const IndexMap& b) {
  return a.strides == b.strides && a.offset == b.offset;
}

/// The single store into `buffer`, or nullptr when there is none or more than one.
const Store* only_store(const Kernel& kernel, int buffer) {
  const Store* found = nullptr;
  for (const Store& store : kernel.stores) {
    if (store.map.buffer != buffer) continue;
    if (found) return nullptr;
    found = &store;
  }
  return found;
}

/// A store map that touches each element of the output once: no stride 0 over a dimension of
/// more than one element (which would write one place from several iterations).
bool writes_each_element_once(const Kernel& kernel, const IndexMap& map) {
  for (int d = 0; d < kernel.rank(); ++d)
    if (map.strides[d] == 0 && kernel.sizes[d] > 1) return false;
  return true;
}

}  // namespace

std::vector<std::pair<int, int>> in_place_candidates(const Kernel& kernel) {
  std::vector<std::pair<int, int>> pairs;
  if (kernel.reduce_rank != 0) return pairs;
  const int num_inputs = kernel.num_inputs();
  for (int out = num_inputs; out < static_cast<int>(kernel.buffers.size()); ++out) {
    const Store* store = only_store(kernel, out);
    if (!store || !writes_each_element_once(kernel, store->map)) continue;
    for (int in = 0; in < num_inputs; ++in) {
      if (ir::dtype_size(kernel.buffers[in].dtype) != ir::dtype_size(kernel.buffers[out].dtype))
        continue;
      bool every_load_matches = true;
      bool loaded = false;
      for (const Expr& expr : kernel.exprs) {
        if (expr.op != Op::Load || expr.map.buffer != in) continue;
        loaded = true;
        every_load_matches = every_load_matches && same_map(expr.map, store->map);
      }
      if (loaded && every_load_matches) pairs.emplace_back(in, out);
    }
  }
  return pairs;
}

}  // namespace kiln::kernel
