#include "backend/codegen/llvm/cpu_schedule.h"

#include <algorithm>

#include "backend/codegen/llvm/store_policy.h"

namespace kiln::codegen {
namespace {

using kernel::Extent;
using kernel::extent_at_least;
using kernel::Kernel;
using kernel::Op;
using kernel::SizeGuards;

/// Whether the kernel's iteration space, in elements of `element_bytes`, holds `bytes` or more.
bool spans_bytes(const Kernel& kernel, int64_t element_bytes, int64_t bytes, SizeGuards* guards) {
  return extent_at_least(kernel, Extent::Elements, (bytes + element_bytes - 1) / element_bytes,
                         guards);
}

/// Streaming stores pay off for one contiguous output of 4- or 8-byte elements the caches would
/// not keep (store_policy.h), whose vectors are at least 32 bytes (so every vector store after
/// the first aligned one is too).
bool streams_output(const Kernel& kernel, int width, int64_t stream_bytes, SizeGuards* guards) {
  if (kernel.stores.size() != 1 || width < 8) return false;
  const kernel::Store& store = kernel.stores[0];
  const int64_t size = ir::dtype_size(kernel.buffers[store.map.buffer].dtype);
  if (store.map.strides.back() != 1 || (size != 4 && size != 8)) return false;
  return spans_bytes(kernel, size, stream_bytes, guards);
}

bool has_element_stores(const Kernel& kernel) {
  return std::any_of(kernel.stores.begin(), kernel.stores.end(),
                     [&](const kernel::Store& s) { return kernel::stores_per_element(kernel, s); });
}

/// The loads worth prefetching a row ahead: contiguous rows of a buffer larger than this
/// machine's per-core caches, read by a kernel that passes over each row more than once. The
/// first pass brings the row into L1 and the later ones compute from there, so the memory system
/// idles unless the second pass asks for the next row: on a softmax it is the difference between
/// computing and loading in turn and doing both at once.
std::vector<int> prefetched_maps(const Kernel& kernel, int width,
                                 const std::vector<RowPass>& passes, SizeGuards* guards) {
  std::vector<int> maps;
  if (kernel.reduce_rank != 1 || width <= 1) return maps;
  const int row_passes = static_cast<int>(passes.size()) + (has_element_stores(kernel) ? 1 : 0);
  if (row_passes < 2) return maps;
  for (size_t m = 0; m < kernel.exprs.size(); ++m) {
    if (kernel.exprs[m].op != Op::Load) continue;
    const kernel::IndexMap& map = kernel.exprs[m].map;
    bool moves_with_rows = false;
    for (int d = 0; d < kernel.row_rank(); ++d)
      moves_with_rows = moves_with_rows || map.strides[d] != 0;
    // The buffer holds one element per element of the iteration space (rows x row size).
    if (map.strides.back() == 1 && moves_with_rows &&
        spans_bytes(kernel, ir::dtype_size(kernel.buffers[map.buffer].dtype), kStreamBytes, guards))
      maps.push_back(static_cast<int>(m));
  }
  return maps;
}

/// Per expr: whether it, or an element-level expr it reads, computes a transcendental function.
std::vector<bool> computes_a_transcendental(const Kernel& kernel,
                                            const std::vector<bool>& element) {
  std::vector<bool> transcendental(kernel.exprs.size(), false);
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    transcendental[i] = kernel::op_traits(kernel.exprs[i].op).transcendental;
    for (int a : kernel.exprs[i].args)
      transcendental[i] = transcendental[i] || (element[a] && transcendental[a]);
  }
  return transcendental;
}

/// The element values to keep in a per-row scratch array: those that contain a transcendental
/// function and that more than one pass over the row needs (pass k computes the k-th row pass's
/// reductions; the last pass the element stores).
std::vector<RowCache> row_caches(const Kernel& kernel, const std::vector<RowPass>& passes,
                                 SizeGuards* guards) {
  std::vector<RowCache> caches;
  if (kernel.reduce_rank != 1 || passes.empty()) return caches;
  if (extent_at_least(kernel, Extent::RowSize, kMaxCachedRow + 1, guards)) return caches;
  const std::vector<bool> element = kernel::element_levels(kernel);
  std::vector<std::vector<int>> roots;  // per pass
  // A pass computes its first reduction's operand: a moments pass reads x alone, never the
  // deviations its variance is written with.
  for (const RowPass& row_pass : passes) {
    roots.emplace_back();
    for (int r : row_pass.reductions)
      roots.back().push_back(kernel.exprs[r].args[0]);
    if (row_pass.moments) roots.back().resize(1);
  }
  roots.emplace_back();
  for (const auto& s : kernel.stores)
    if (kernel::stores_per_element(kernel, s)) roots.back().push_back(s.value);
  const size_t n = kernel.exprs.size();
  std::vector<int> first_pass(n, -1), last_pass(n, -1);
  for (int p = 0; p < static_cast<int>(roots.size()); ++p) {
    std::vector<int> stack = roots[p];
    std::vector<bool> seen(n, false);
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (seen[id] || !element[id]) continue;
      seen[id] = true;
      if (first_pass[id] < 0) first_pass[id] = p;
      last_pass[id] = p;
      for (int a : kernel.exprs[id].args)
        stack.push_back(a);
    }
  }
  const std::vector<bool> expensive = computes_a_transcendental(kernel, element);
  for (size_t i = 0; i < n; ++i) {
    if (!expensive[i] || first_pass[i] < 0 || first_pass[i] == last_pass[i]) continue;
    if (!ir::is_floating(kernel.exprs[i].dtype)) continue;
    caches.push_back({static_cast<int>(i), first_pass[i]});
  }
  return caches;
}

/// Whether a reduction's operand computes a transcendental function (softmax's sum of exps).
bool reduces_a_transcendental(const Kernel& kernel, const std::vector<RowPass>& passes) {
  const std::vector<bool> element = kernel::element_levels(kernel);
  const std::vector<bool> transcendental = computes_a_transcendental(kernel, element);
  for (const RowPass& row_pass : passes) {
    for (int r : row_pass.reductions) {
      const int operand = kernel.exprs[r].args[0];
      if (element[operand] && transcendental[operand]) return true;
    }
  }
  return false;
}

/// Whether the kernel sums or averages floats (a max or min, or an integer sum, is the same
/// whatever the grouping).
bool sums_floats(const Kernel& kernel) {
  return std::any_of(kernel.exprs.begin(), kernel.exprs.end(), [](const kernel::Expr& e) {
    return e.op == kernel::Op::Reduce && ir::is_floating(e.dtype) &&
           (e.reduce == kernel::ReduceKind::Sum || e.reduce == kernel::ReduceKind::Mean);
  });
}

/// Whether dim `d`'s size is a run-time value (a size-generic kernel's term).
bool varies(const Kernel& kernel, int d) {
  return !kernel.size_terms.empty() && kernel.size_terms[d].has_value();
}

}  // namespace

CpuSchedule schedule_cpu_kernel(const Kernel& collapsed, const CpuTarget& target) {
  CpuSchedule s;
  s.vector_bits = target.vector_bits;
  s.launch = choose_launch(collapsed);
  SizeGuards* guards = &s.guards;
  const int width = std::max(1, target.vector_bits / 32);
  if (reduces_across_rows(collapsed, width, guards)) {
    s.strategy = CpuSchedule::Strategy::AcrossRows;
    if (sums_floats(collapsed)) {
      // A row of run-time length is chunked at every length (a short one has no whole chunk).
      const bool chunks =
          varies(collapsed, collapsed.rank() - 1) ||
          extent_at_least(collapsed, Extent::Dim, 2 * kAcrossRowsSumChunk, guards, -1);
      s.sum_chunk = chunks ? kAcrossRowsSumChunk : 0;
    }
    return s;
  }
  if (transposes(collapsed, guards)) {
    s.strategy = CpuSchedule::Strategy::Transpose;
    return s;
  }
  if (collapsed.reduce_rank == 0) {
    s.strategy = CpuSchedule::Strategy::Elementwise;
    s.streaming_stores = streams_output(collapsed, width, target.stream_bytes, guards);
    return s;
  }
  s.strategy = CpuSchedule::Strategy::AlongRows;
  s.streaming_stores =
      collapsed.reduce_rank == 1 && streams_output(collapsed, width, target.stream_bytes, guards);
  s.row_passes = row_passes(collapsed, width, target.one_pass_moments, guards);
  // Each accumulator carries its own copy of the operand's temporaries. Under a transcendental
  // (exp: ~17 vector instructions and a dozen constants) four of them overflow AVX2's 16
  // registers, spilling and reloading constants every vector, while two already hide the add's
  // latency behind that much work (softmax 4096x1024 on AVX2: ~10% faster with two).
  if (target.vector_bits < 512 && reduces_a_transcendental(collapsed, s.row_passes)) {
    s.reduce_unroll = 2;
  }
  const bool long_rows = varies(collapsed, collapsed.rank() - 1) ||
                         extent_at_least(collapsed, Extent::Dim, kSumChunk + 1, guards, -1);
  s.sum_chunk = long_rows ? kSumChunk : 0;
  s.prefetched_maps = prefetched_maps(collapsed, width, s.row_passes, guards);
  s.row_caches = row_caches(collapsed, s.row_passes, guards);
  return s;
}

std::string schedule_key(const CpuSchedule& s) {
  std::string key = std::to_string(static_cast<int>(s.strategy)) + "/" +
                    std::to_string(s.vector_bits) + (s.streaming_stores ? "/nt" : "") + "/u" +
                    std::to_string(s.reduce_unroll) + "/c" + std::to_string(s.sum_chunk) + "/p";
  for (const RowPass& pass : s.row_passes) {
    key += pass.moments ? "m" : "r";
    for (int r : pass.reductions)
      key += std::to_string(r) + ",";
  }
  key += "/f";
  for (int m : s.prefetched_maps)
    key += std::to_string(m) + ",";
  key += "/rc";
  for (const RowCache& c : s.row_caches)
    key += std::to_string(c.expr) + ":" + std::to_string(c.first_pass) + ",";
  return key;
}

}  // namespace kiln::codegen
