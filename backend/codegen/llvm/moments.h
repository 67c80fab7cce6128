// A layer norm's statistics in one pass over each row. Its kernel computes the mean m of x, then
// the mean of (x - m) * (x - m): two passes, the second waiting for the first. The LLVM emitter
// computes both from one pass instead (kernel_emitter.cpp: moments), with sums of x - K and of
// (x - K)^2 per vector lane, K being the row's first vector: shifted by a value of the row the
// sums stay small, so the squares' sum loses little to cancellation (at most ~n/width ulps of
// the variance, n the row's length, against ~log n for two passes); the lanes then merge their
// partial moments exactly (Chan, Golub and LeVeque's pairwise formula). The kernel IR, its
// interpreter and the CUDA code keep the two reductions. Torch-free and LLVM-free.
#pragma once

#include <optional>
#include <vector>

#include "passes/kernel/kernel.h"
#include "passes/kernel/size_guards.h"

namespace kiln::codegen {

using kernel::variance_of;  // the pattern a moments pass computes (passes/kernel/kernel.h)

/// One walk over each row: the reductions it computes together. Either a mean and its variance
/// (`moments`: the one-pass statistics above), or reductions none of which reads another's
/// result (a gradient's sum and the sum of it times x - mean in batch norm's backward: the
/// values they share are computed once per element).
struct RowPass {
  std::vector<int> reductions;
  bool moments = false;
  bool operator==(const RowPass&) const = default;
};

/// The passes a kernel reducing along its rows makes over each row, in order. A reduction joins
/// the pass before it when it does not read that pass's results; a mean and its variance share
/// one where the kernel reduces one dim and its rows hold at least one vector of `width` lanes,
/// unless `one_pass` is false (`KILN_DISABLE=one_pass_moments`, for bisecting). The row size it
/// compares is recorded in `guards` when given.
std::vector<RowPass> row_passes(const kernel::Kernel& kernel, int width, bool one_pass = true,
                                kernel::SizeGuards* guards = nullptr);

}  // namespace kiln::codegen
