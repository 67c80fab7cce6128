// The conditions on a kernel's extents that a size-dependent decision relied on. A schedule
// records one guard for every test of an extent it makes (streaming stores past a byte
// threshold, row caches below a row length, a vector width that divides the innermost dim, ...),
// so the schedule states exactly which sizes it is valid for: any kernel of the same structure
// whose extents satisfy the guards gets the same schedule, less its launch (a function of the
// sizes, computed where they are known). A size-generic kernel's plan turns the guards into its
// shape class's checks; nothing about the schedule need be redone when extents become symbols.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// The extents a decision may test.
enum class Extent {
  Elements,  // the product of every dim (the iteration space)
  RowSize,   // the product of the reduced dims (Kernel::row_size)
  Rows,      // the product of the kept dims (Kernel::num_rows)
  Dim,       // one dim, SizeGuard::dim (negative: from the innermost, -1 being it)
  // The largest element offset any load or store reaches, plus one (32-bit indexing).
  Reach,
  // The absolute stride of one access along one dim: SizeGuard::access indexes the kernel's
  // accesses (accesses()), SizeGuard::dim the dim. A tensor's strides are products of its
  // sizes, so a size-generic kernel's strides vary with them.
  Stride,
  Offset,  // the absolute offset of access SizeGuard::access
};

enum class Test {
  AtLeast,     // extent >= bound
  MultipleOf,  // extent % bound == 0
};

/// One test and the outcome the decision saw: `holds` false records extent < bound, or extent
/// not a multiple of bound.
struct SizeGuard {
  Extent extent = Extent::Elements;
  int dim = 0;
  int access = 0;  // Extent::Stride and Extent::Offset only
  Test test = Test::AtLeast;
  int64_t bound = 0;
  bool holds = true;
  bool operator==(const SizeGuard&) const = default;
};

using SizeGuards = std::vector<SizeGuard>;

/// The value of `extent` in `kernel` (`dim` for Extent::Dim and Extent::Stride, `access` for
/// Extent::Stride and Extent::Offset).
int64_t extent_value(const Kernel& kernel, Extent extent, int dim = 0, int access = 0);

/// Whether extent >= bound in `kernel`; when `guards` is given, the test is recorded there with
/// its outcome. Every size-dependent comparison of a schedule goes through this.
bool extent_at_least(const Kernel& kernel, Extent extent, int64_t bound, SizeGuards* guards,
                     int dim = 0, int access = 0);

/// Whether extent % factor == 0 (factor > 0), recorded like extent_at_least.
bool extent_multiple_of(const Kernel& kernel, Extent extent, int64_t factor, SizeGuards* guards,
                        int dim = 0, int access = 0);

/// Records lo <= extent < hi, which holds, for a decision that takes the extent's value within
/// that range (a block size rounded up from a row's length, ...).
void record_range(const Kernel& kernel, Extent extent, int64_t lo, int64_t hi, SizeGuards* guards,
                  int dim = 0);

/// Whether every guard holds for `kernel`'s extents (false where a guard names a dim or an
/// access the kernel does not have).
bool guards_hold(const SizeGuards& guards, const Kernel& kernel);

/// "elements>=1048576 row<8193 dim[-1]%4==0": part of a schedule's printed form.
std::string print_guards(const SizeGuards& guards);

}  // namespace kiln::kernel
