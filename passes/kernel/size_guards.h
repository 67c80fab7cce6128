// The conditions on a kernel's extents that a size-dependent decision relied on. A schedule
// records one guard for every comparison of an extent it makes (streaming stores past a byte
// threshold, row caches below a row length, ...), so the schedule states exactly which sizes it
// is valid for: any kernel of the same structure whose extents satisfy the guards gets the same
// schedule, less its launch (a function of the sizes, computed where they are known). A
// size-generic kernel's plan turns the guards into its shape class's checks; nothing about the
// schedule need be redone when extents become symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// The extents a decision may compare.
enum class Extent {
  Elements,  // the product of every dim (the iteration space)
  RowSize,   // the product of the reduced dims (Kernel::row_size)
  Dim,       // one dim, SizeGuard::dim (negative: from the innermost, -1 being it)
};

/// extent >= bound when `at_least`, else extent < bound.
struct SizeGuard {
  Extent extent = Extent::Elements;
  int dim = 0;
  int64_t bound = 0;
  bool at_least = true;
  bool operator==(const SizeGuard&) const = default;
};

using SizeGuards = std::vector<SizeGuard>;

/// The value of `extent` in `kernel` (`dim` for Extent::Dim).
int64_t extent_value(const Kernel& kernel, Extent extent, int dim = 0);

/// Whether extent >= bound in `kernel`; when `guards` is given, the comparison is recorded there
/// with its outcome. Every size-dependent decision of a schedule goes through this.
bool extent_at_least(const Kernel& kernel, Extent extent, int64_t bound, SizeGuards* guards,
                     int dim = 0);

/// Whether every guard holds for `kernel`'s extents.
bool guards_hold(const SizeGuards& guards, const Kernel& kernel);

/// "elements>=1048576 row<8193 dim[-1]>=16": part of a schedule's printed form.
std::string print_guards(const SizeGuards& guards);

}  // namespace kiln::kernel
