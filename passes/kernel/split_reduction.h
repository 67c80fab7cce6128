// Splitting a reduction into pieces that threads can share: a full reduction (a kernel with one
// row: x.sum(), ((a - b) ** 2).mean()), which a code generator runs on one thread, or a kernel
// with rows along its outermost reduced dim. Split, the `partial` kernel reduces each piece of
// each row to one partial result per reduction (its pieces, times the kernel's rows, are its
// rows, so they spread across threads), and the `finish` kernel folds the partials row by row
// and computes what follows the reductions.
//
//   kernel k [16777216] reduce 1          partial [256, 65536] reduce 1: piece p's sum -> w0[p]
//     %0 = load b0 [1]              ->    finish  [256] reduce 1:  sum of w0 -> b1
//     %1 = reduce.sum %0
//     store b1 [0] = %1
//
// The pieces split the outermost reduced dim evenly (their count divides it), so every piece has
// the same elements and a mean of the pieces' means is the mean. A variance (the mean of squared
// deviations from a mean, variance_of) is the one reduction that may read another's result: each
// piece computes its own mean and variance, and finish merges them (the mean of the variances
// plus the mean of the squared deviations of the means from their mean). Sums and means of
// float16 and bfloat16 are carried in float32 partials and rounded once, as the whole row would be.
// Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

struct SplitReduction {
  int64_t pieces = 0;
  int64_t rows = 1;  // the kernel's rows
  /// The kernel's buffers, then one output per partial: pieces * rows values each.
  Kernel partial;
  /// The kernel's inputs, then the partials (as inputs), then the kernel's outputs.
  Kernel finish;
  /// For each of finish's buffers, its index among partial's.
  std::vector<int> finish_buffers;
};

/// `collapsed` split into pieces of at least `min_piece_elements` elements each, at most
/// `max_pieces` of them; nullopt when it is not a full reduction (it has rows), when one reduction
/// reads another's result other than a variance its mean's, or an element store does (x -
/// x.mean()), when an output is written in place of an input, or when no piece count of at least 2
/// divides its outermost dim within those limits.
std::optional<SplitReduction> split_full_reduction(const Kernel& collapsed,
                                                   int64_t min_piece_elements, int64_t max_pieces);

/// The piece count split_full_reduction would take (0: the kernel is not split): what the
/// pipeline's split_reductions pass records on a kernel (Kernel::split_pieces).
int64_t full_reduction_pieces(const Kernel& collapsed, int64_t min_piece_elements,
                              int64_t max_pieces);

/// The same for a kernel with rows: the outermost reduced dim is split into pieces of at least
/// `min_piece_elements` elements over all rows, at most `max_pieces` of them; each piece reduces
/// its stretch for every row (the partials of piece p: [rows]), and finish folds them per row.
/// 0 when it cannot be split (as split_full_reduction says) or no piece count of at least 2
/// divides that dim within those limits. Whether a split pays is the target's call.
int64_t reduced_dim_pieces(const Kernel& collapsed, int64_t min_piece_elements, int64_t max_pieces);

/// `collapsed` split into exactly `pieces` pieces (a count full_reduction_pieces or
/// reduced_dim_pieces gave); nullopt when it cannot be.
std::optional<SplitReduction> split_into_pieces(const Kernel& collapsed, int64_t pieces);

}  // namespace kiln::kernel
