#include "passes/kernel/size_guards.h"

#include <algorithm>
#include <cstdlib>

namespace kiln::kernel {
namespace {

int64_t product(const std::vector<int64_t>& sizes, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= sizes[d];
  return n;
}

int64_t reach(const Kernel& kernel) {
  int64_t extent = 1;
  for (const IndexMap* m : accesses(kernel)) {
    int64_t furthest = std::abs(m->offset);
    for (int d = 0; d < kernel.rank(); ++d)
      furthest += std::max<int64_t>(kernel.sizes[d] - 1, 0) * std::abs(m->strides[d]);
    extent = std::max(extent, furthest + 1);
  }
  return extent;
}

/// Whether `guard` names a dim and an access `kernel` has.
bool applies_to(const SizeGuard& guard, const Kernel& kernel) {
  const bool names_dim = guard.extent == Extent::Dim || guard.extent == Extent::Stride;
  if (names_dim && (guard.dim >= kernel.rank() || -guard.dim > kernel.rank())) return false;
  const bool names_access = guard.extent == Extent::Stride || guard.extent == Extent::Offset;
  return !names_access ||
         (guard.access >= 0 && static_cast<size_t>(guard.access) < accesses(kernel).size());
}

bool passes(const SizeGuard& guard, int64_t value) {
  return guard.test == Test::AtLeast ? value >= guard.bound : value % guard.bound == 0;
}

SizeGuard make_guard(Extent extent, int dim, int access, Test test, int64_t bound) {
  const bool names_dim = extent == Extent::Dim || extent == Extent::Stride;
  const bool names_access = extent == Extent::Stride || extent == Extent::Offset;
  return {extent, names_dim ? dim : 0, names_access ? access : 0, test, bound, true};
}

/// Runs `guard`'s test on `kernel`, records it with its outcome in `guards` (when given) and
/// returns the outcome.
bool record(const Kernel& kernel, SizeGuard guard, SizeGuards* guards) {
  guard.holds = passes(guard, extent_value(kernel, guard.extent, guard.dim, guard.access));
  if (guards) guards->push_back(guard);
  return guard.holds;
}

}  // namespace

int64_t extent_value(const Kernel& kernel, Extent extent, int dim, int access) {
  const int d = dim < 0 ? kernel.rank() + dim : dim;
  switch (extent) {
    case Extent::Elements:
      return product(kernel.sizes, 0, kernel.sizes.size());
    case Extent::RowSize:
      return kernel.row_size();
    case Extent::Rows:
      return kernel.num_rows();
    case Extent::Dim:
      return kernel.sizes.at(d);
    case Extent::Reach:
      return reach(kernel);
    case Extent::Stride:
      return std::abs(accesses(kernel).at(access)->strides.at(d));
    case Extent::Offset:
      return std::abs(accesses(kernel).at(access)->offset);
  }
  return 0;
}

bool extent_at_least(const Kernel& kernel, Extent extent, int64_t bound, SizeGuards* guards,
                     int dim, int access) {
  return record(kernel, make_guard(extent, dim, access, Test::AtLeast, bound), guards);
}

bool extent_multiple_of(const Kernel& kernel, Extent extent, int64_t factor, SizeGuards* guards,
                        int dim, int access) {
  return record(kernel, make_guard(extent, dim, access, Test::MultipleOf, factor), guards);
}

void record_range(const Kernel& kernel, Extent extent, int64_t lo, int64_t hi, SizeGuards* guards,
                  int dim) {
  extent_at_least(kernel, extent, lo, guards, dim);
  extent_at_least(kernel, extent, hi, guards, dim);
}

bool guards_hold(const SizeGuards& guards, const Kernel& kernel) {
  for (const SizeGuard& g : guards) {
    if (!applies_to(g, kernel)) return false;
    if (passes(g, extent_value(kernel, g.extent, g.dim, g.access)) != g.holds) return false;
  }
  return true;
}

std::string print_guards(const SizeGuards& guards) {
  std::string text;
  for (const SizeGuard& g : guards) {
    if (!text.empty()) text += " ";
    const std::string dim = "[" + std::to_string(g.dim) + "]";
    const std::string access = "#" + std::to_string(g.access);
    switch (g.extent) {
      case Extent::Elements:
        text += "elements";
        break;
      case Extent::RowSize:
        text += "row";
        break;
      case Extent::Rows:
        text += "rows";
        break;
      case Extent::Dim:
        text += "dim" + dim;
        break;
      case Extent::Reach:
        text += "reach";
        break;
      case Extent::Stride:
        text += "stride" + access + dim;
        break;
      case Extent::Offset:
        text += "offset" + access;
        break;
    }
    const std::string bound = std::to_string(g.bound);
    if (g.test == Test::AtLeast) {
      text += (g.holds ? ">=" : "<") + bound;
    } else {
      text += "%" + bound + (g.holds ? "==0" : "!=0");
    }
  }
  return text;
}

}  // namespace kiln::kernel
