#include "backend/codegen/llvm/moments.h"

#include <algorithm>

namespace kiln::codegen {

using kernel::Op;
using kernel::ReduceKind;

namespace {

/// True when expr `id` reads (through its arguments) any of `reductions`.
bool reads_any(const kernel::Kernel& kernel, int id, const std::vector<int>& reductions) {
  std::vector<int> stack = {id};
  std::vector<bool> seen(kernel.exprs.size(), false);
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (seen[at]) continue;
    seen[at] = true;
    if (std::find(reductions.begin(), reductions.end(), at) != reductions.end()) return true;
    for (int a : kernel.exprs[at].args)
      stack.push_back(a);
  }
  return false;
}

}  // namespace

std::vector<RowPass> row_passes(const kernel::Kernel& kernel, int width, bool one_pass,
                                kernel::SizeGuards* guards) {
  std::vector<RowPass> passes;
  std::vector<bool> planned(kernel.exprs.size(), false);
  const bool one_pass_moments =
      one_pass && kernel.reduce_rank == 1 && width > 1 &&
      kernel::extent_at_least(kernel, kernel::Extent::RowSize, width, guards);
  for (size_t id = 0; id < kernel.exprs.size(); ++id) {
    if (kernel.exprs[id].op != Op::Reduce || planned[id]) continue;
    const int reduction = static_cast<int>(id);
    if (one_pass_moments) {
      if (std::optional<int> var = variance_of(kernel, reduction)) {
        passes.push_back({{reduction, *var}, true});
        planned[*var] = true;
        continue;
      }
    }
    if (!passes.empty() && !passes.back().moments &&
        !reads_any(kernel, kernel.exprs[id].args[0], passes.back().reductions)) {
      passes.back().reductions.push_back(reduction);
    } else {
      passes.push_back({{reduction}, false});
    }
  }
  return passes;
}

}  // namespace kiln::codegen
