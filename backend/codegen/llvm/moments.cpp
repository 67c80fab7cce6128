#include "backend/codegen/llvm/moments.h"

#include <algorithm>

namespace kiln::codegen {

using kernel::DType;
using kernel::Op;
using kernel::ReduceKind;

std::optional<int> variance_of(const kernel::Kernel& kernel, int mean) {
  const auto& exprs = kernel.exprs;
  const kernel::Expr& m = exprs.at(mean);
  if (m.op != Op::Reduce || m.reduce != ReduceKind::Mean) return std::nullopt;
  if (m.dtype != DType::Float32 && m.dtype != DType::Float64) return std::nullopt;
  const int x = m.args[0];
  if (exprs[x].dtype != m.dtype) return std::nullopt;
  for (size_t v = mean + 1; v < exprs.size(); ++v) {
    const kernel::Expr& var = exprs[v];
    if (var.op != Op::Reduce || var.reduce != ReduceKind::Mean || var.dtype != m.dtype) continue;
    const kernel::Expr& square = exprs[var.args[0]];
    if (square.op != Op::Mul || square.args[0] != square.args[1]) continue;
    const kernel::Expr& deviation = exprs[square.args[0]];
    if (deviation.op == Op::Sub && deviation.args[0] == x && deviation.args[1] == mean &&
        deviation.dtype == m.dtype && square.dtype == m.dtype) {
      return static_cast<int>(v);
    }
  }
  return std::nullopt;
}

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

std::vector<RowPass> row_passes(const kernel::Kernel& kernel, int width, bool one_pass) {
  std::vector<RowPass> passes;
  std::vector<bool> planned(kernel.exprs.size(), false);
  const bool one_pass_moments =
      one_pass && kernel.reduce_rank == 1 && width > 1 && kernel.row_size() >= width;
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
