// A kernel's CPU schedule: every decision the LLVM emitters make about a kernel besides what it
// computes, taken before any IR is emitted, from the collapsed kernel and the host. The emitters
// only follow it, and the kernel cache keys on (kernel, schedule): two kernels with the same code
// key and the same schedule compile to the same code. The decisions that compare sizes record
// the comparisons (`guards`), so a schedule says which sizes it holds for and need not be redone
// when a kernel's extents become symbols. LLVM-free, so it is tested alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/codegen/llvm/moments.h"
#include "backend/codegen/llvm/schedule.h"
#include "passes/kernel/kernel.h"
#include "passes/kernel/size_guards.h"

namespace kiln::codegen {

/// What the schedule is computed for: the host's vector width and store policy, and the switches.
struct CpuTarget {
  int vector_bits = 128;
  int64_t stream_bytes = 0;  // outputs of this many bytes or more stream (store_policy.h)
  bool one_pass_moments = true;
  bool operator==(const CpuTarget&) const = default;
};

/// A value a reducing kernel keeps in a per-row scratch array: computed in pass `first_pass`,
/// read back in the later ones.
struct RowCache {
  int expr;
  int first_pass;
  bool operator==(const RowCache&) const = default;
};

struct CpuSchedule {
  enum class Strategy {
    Elementwise,  // elements along the innermost dim (kernel_emitter.h)
    AlongRows,    // a reduction vectorized along its rows (kernel_emitter.h)
    AcrossRows,   // a reduction vectorized across its rows (across_rows_emitter.h)
    Transpose,    // an elementwise kernel that transposes, by tiles (transpose_emitter.h)
  };
  Strategy strategy = Strategy::Elementwise;
  int vector_bits = 128;  // lanes of the dtype-independent vector: vector_bits / 32
  KernelLaunch launch;
  /// One contiguous output the caches would not keep, written with non-temporal vector stores
  /// after the first 64-byte line (elementwise kernels, and rows of one-dim reductions).
  bool streaming_stores = false;
  // Along rows only:
  std::vector<RowPass> row_passes;  // the passes over each row (a mean and its variance may pair)
  int reduce_unroll = 4;            // independent vector accumulators per reduction
  // A float sum along a longer row walks it in chunks of this; across rows, a float sum adds each
  // row's elements in chunks of this many (0: one after another).
  int64_t sum_chunk = 0;
  std::vector<int> prefetched_maps;  // loads asked for a row ahead, in the second pass
  std::vector<RowCache> row_caches;  // values more than one pass needs, computed once
  /// Every comparison of an extent the decisions above made, with its outcome: a kernel of the
  /// same structure whose sizes satisfy them gets this schedule, less its launch, which is a
  /// function of the sizes (choose_launch). Not part of the key: the decisions are.
  kernel::SizeGuards guards;
  bool operator==(const CpuSchedule&) const = default;
};

/// `collapsed`: a kernel collapse_dims made.
CpuSchedule schedule_cpu_kernel(const kernel::Kernel& collapsed, const CpuTarget& target);

/// The schedule as text, less its launch (which the caller's kernel sets): part of the kernel
/// cache's key.
std::string schedule_key(const CpuSchedule& schedule);

/// Across rows, float sums over an innermost reduced dim of at least two chunks add each row's
/// elements in chunks of this many: the error bound is (n / chunk + chunk) ulp-sized steps
/// instead of n.
inline constexpr int64_t kAcrossRowsSumChunk = 16;

/// Float sums along an innermost dim longer than this walk it in chunks of this many elements
/// (a multiple of every vector width times the unroll): each chunk's accumulators start from the
/// identity and are added into the row's when it ends. An accumulator then adds at most
/// kSumChunk / (width * unroll) values (256 at 16 float lanes) before it is folded in, and the
/// row's at most one per chunk, so a float sum's error grows with those counts rather than with
/// n / (width * unroll): ~65K terms per accumulator over a row of 4M floats unchunked.
inline constexpr int64_t kSumChunk = 16384;

/// Rows longer than this (in elements) cache no values: at most 64 KB of stack per cached value.
inline constexpr int64_t kMaxCachedRow = 8192;

}  // namespace kiln::codegen
