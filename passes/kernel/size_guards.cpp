#include "passes/kernel/size_guards.h"

namespace kiln::kernel {

int64_t extent_value(const Kernel& kernel, Extent extent, int dim) {
  switch (extent) {
    case Extent::Elements: {
      int64_t n = 1;
      for (int64_t d : kernel.sizes)
        n *= d;
      return n;
    }
    case Extent::RowSize:
      return kernel.row_size();
    case Extent::Dim:
      return kernel.sizes.at(dim < 0 ? kernel.rank() + dim : dim);
  }
  return 0;
}

bool extent_at_least(const Kernel& kernel, Extent extent, int64_t bound, SizeGuards* guards,
                     int dim) {
  const bool holds = extent_value(kernel, extent, dim) >= bound;
  if (guards) guards->push_back({extent, extent == Extent::Dim ? dim : 0, bound, holds});
  return holds;
}

bool guards_hold(const SizeGuards& guards, const Kernel& kernel) {
  for (const SizeGuard& g : guards) {
    if (g.extent == Extent::Dim && (g.dim >= kernel.rank() || -g.dim > kernel.rank())) return false;
    if ((extent_value(kernel, g.extent, g.dim) >= g.bound) != g.at_least) return false;
  }
  return true;
}

std::string print_guards(const SizeGuards& guards) {
  std::string text;
  for (const SizeGuard& g : guards) {
    if (!text.empty()) text += " ";
    switch (g.extent) {
      case Extent::Elements:
        text += "elements";
        break;
      case Extent::RowSize:
        text += "row";
        break;
      case Extent::Dim:
        text += "dim[" + std::to_string(g.dim) + "]";
        break;
    }
    text += (g.at_least ? ">=" : "<") + std::to_string(g.bound);
  }
  return text;
}

}  // namespace kiln::kernel
