// The CPU schedule of a kernel: how the work is split across threads, and how wide the vectors
// are. Torch-free and LLVM-free, so it is tested alone.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "passes/kernel/access_order.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/split_reduction.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen {

using kernel::collapse_dims;

using kiln::KernelLaunch;  // runtime/kernel_abi.h

/// Roughly the work (in elements of a copy-like kernel) below which splitting across threads
/// costs more than it gains. ATen's grain too (at::internal::GRAIN_SIZE). Measured here (2
/// threads): a 2-op elementwise kernel over 64K floats takes 5.2 us split against 7.6 us on one
/// thread, a row sum over [1024, 256] 7.6 us against 12.6 us; at 16K elements one thread wins.
inline constexpr int64_t kParallelGrainElements = 32768;

/// What one element costs relative to a copy: 1, plus kTranscendentalCost for every exp, log,
/// tanh, erf, sigmoid or pow per element (each is a polynomial of ~20 vector instructions, which
/// makes a softmax compute-bound: its grain shrinks by that factor).
inline constexpr int64_t kTranscendentalCost = 8;
int64_t element_cost(const kernel::Kernel& kernel);

KernelLaunch choose_launch(const kernel::Kernel& collapsed);

/// How a kernel's launch follows from its sizes, for code that walks tiles of a transposing
/// kernel (`transposing`) or not: what a size-generic kernel's launch is computed from per call
/// (a few integer products), and choose_launch at the kernel's own sizes. The code fixes the
/// walk, so the rule keeps it at every size, tiles included.
struct LaunchRule {
  std::vector<kernel::SizeTerm> sizes;  // per dim, a term or a constant (no factors)
  int reduce_rank = 0;
  bool transposing = false;
  int64_t grain_elements = 1;
  /// At size inputs `inputs` (a kernel without terms reads none).
  KernelLaunch at(std::span<const int64_t> inputs) const;
};
LaunchRule launch_rule(const kernel::Kernel& collapsed, bool transposing);

/// A full reduction (one row) runs on one thread unless it is split into pieces
/// (kernel/split_reduction.h): each of at least the grain's work (kParallelGrainElements /
/// element_cost), at most this many, so that up to that many threads share it.
inline constexpr int64_t kMaxReductionPieces = 256;
std::optional<kernel::SplitReduction> split_reduction(const kernel::Kernel& collapsed);
/// The piece count split_reduction takes (0: none): the CPU's answer to the pipeline's
/// split_reductions pass (Kernel::split_pieces).
int64_t reduction_pieces(const kernel::Kernel& collapsed);

/// Rows (along the next-to-innermost dim) of one piece of a transposing kernel's launch range.
inline constexpr int64_t kTransposeTileRows = 16;

/// Whether an elementwise kernel transposes (transpose_emitter.h): its stores run along the
/// innermost dim while a load runs along the next one out and strides along the innermost
/// (NCHW <-> NHWC conversions, `x.transpose(1, 2).contiguous()` of a [.., S, D] with D strided),
/// and both dims hold at least a tile (the sizes compared are recorded in `guards` when given). Its
/// launch range is then tiles of kTransposeTileRows rows of the next-to-innermost dim, each with
/// every element of the innermost dim.
bool transposes(const kernel::Kernel& collapsed, kernel::SizeGuards* guards = nullptr);

/// The loads of an elementwise kernel that run along its next-to-innermost dim (stride 1) and
/// stride along the innermost: the ones a transposing kernel reads by tiles.
std::vector<int> transposed_loads(const kernel::Kernel& collapsed);

/// A reducing kernel is vectorized across its rows rather than along them when
/// reduces_across_rows(collapsed, vector width) (kernel/access_order.h), as x.sum(0) on a
/// row-major x, or a batch-1 linear on a transposed weight: each vector holds one element of
/// `width` neighbouring rows and the reduced dims are walked one element at a time (contiguous
/// loads, no horizontal sums). Along the rows, the same kernel would read every vector lane by
/// lane.
using kernel::reduces_across_rows;

/// Whether the host's feature string ("+avx512f,+avx2,...") has `feature` ("+avx512f").
bool has_feature(const std::string& features, const std::string& feature);

/// Vector width in bits for the host's feature string: 512, 256 or 128.
int vector_bits_for(const std::string& features);

}  // namespace kiln::codegen
