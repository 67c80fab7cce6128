#include "backend/codegen/llvm/schedule.h"

#include <algorithm>

#include "passes/kernel/size_terms.h"

namespace kiln::codegen {

using kernel::Kernel;
using kernel::Op;

int64_t element_cost(const Kernel& kernel) {
  const std::vector<bool> element = kernel::element_levels(kernel);
  int64_t cost = 1;
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    // Row-level ones run once per row: no cost per element.
    if (kernel::op_traits(kernel.exprs[i].op).transcendental && element[i])
      cost += kTranscendentalCost;
  }
  return cost;
}

std::vector<int> transposed_loads(const Kernel& kernel) {
  std::vector<int> loads;
  const int rank = kernel.rank();
  if (kernel.reduce_rank != 0 || rank < 2) return loads;
  for (size_t e = 0; e < kernel.exprs.size(); ++e) {
    const kernel::Expr& x = kernel.exprs[e];
    const int64_t along = x.op == Op::Load ? x.map.strides[rank - 1] : 0;
    if (along != 0 && along != 1 && x.map.strides[rank - 2] == 1)
      loads.push_back(static_cast<int>(e));
  }
  return loads;
}

bool transposes(const Kernel& kernel, kernel::SizeGuards* guards) {
  const int rank = kernel.rank();
  if (kernel.reduce_rank != 0 || rank < 2 || kernel.stores.empty()) return false;
  const int inner = rank - 1, next = rank - 2;
  for (const auto& s : kernel.stores)
    if (s.map.strides[inner] != 1) return false;
  if (transposed_loads(kernel).empty()) return false;
  using kernel::Extent;
  return kernel::extent_at_least(kernel, Extent::Dim, kTransposeTileRows, guards, inner) &&
         kernel::extent_at_least(kernel, Extent::Dim, kTransposeTileRows, guards, next);
}

KernelLaunch choose_launch(const Kernel& kernel) {
  return launch_rule(kernel, transposes(kernel)).at(kernel.size_inputs);
}

LaunchRule launch_rule(const Kernel& kernel, bool transposing) {
  LaunchRule rule;
  for (int d = 0; d < kernel.rank(); ++d)
    rule.sizes.push_back(kernel::size_term(kernel, d));
  rule.reduce_rank = kernel.reduce_rank;
  rule.transposing = transposing;
  rule.grain_elements = std::max<int64_t>(1, kParallelGrainElements / element_cost(kernel));
  return rule;
}

KernelLaunch LaunchRule::at(std::span<const int64_t> inputs) const {
  const int rank = static_cast<int>(sizes.size());
  auto product = [&](int first, int last) {
    int64_t p = 1;
    for (int d = first; d < last; ++d)
      p *= kernel::evaluate(sizes[d], inputs);
    return p;
  };
  if (transposing) {
    const int64_t rows = kernel::evaluate(sizes[rank - 2], inputs);
    const int64_t tiles = (rows + kTransposeTileRows - 1) / kTransposeTileRows;
    const int64_t tile_elements = kTransposeTileRows * kernel::evaluate(sizes[rank - 1], inputs);
    return {product(0, rank - 2) * tiles,
            std::max<int64_t>(1, grain_elements / std::max<int64_t>(tile_elements, 1))};
  }
  if (reduce_rank == 0) return {product(0, rank), grain_elements};
  const int64_t row = std::max<int64_t>(product(rank - reduce_rank, rank), 1);
  return {product(0, rank - reduce_rank), std::max<int64_t>(1, grain_elements / row)};
}

std::optional<kernel::SplitReduction> split_reduction(const Kernel& collapsed) {
  const int64_t pieces = reduction_pieces(collapsed);
  if (pieces == 0) return std::nullopt;
  return kernel::split_into_pieces(collapsed, pieces);
}

int64_t reduction_pieces(const Kernel& collapsed) {
  const int64_t grain_elements =
      std::max<int64_t>(1, kParallelGrainElements / element_cost(collapsed));
  if (collapsed.row_rank() == 0)
    return kernel::full_reduction_pieces(collapsed, grain_elements, kMaxReductionPieces);
  // Rows side by side in memory (a per-channel mean of a channels-last map): split between
  // threads, the rows would give each thread a slice of every pixel, so both walk the whole
  // input, and the elementwise kernel after it (which splits the memory into stretches) finds
  // half its lines in the other core's cache. Split along the reduced dims, each thread reads a
  // stretch of its own. (Width 2: how memory runs, whatever the vector width.)
  // A vector against a matrix (a linear of a few rows) is not split: its rows are dot products
  // whose matrix rows are read once and by no later kernel, so threads taking rows of their own
  // (as any kernel's do) lose nothing, and the split's partial and finish kernels would double
  // what it costs to compile (the first decoding step of a language model is a dozen of them).
  if (!kernel::reduces_across_rows(collapsed, 2) ||
      kernel::reads_one_vector_for_every_row(collapsed))
    return 0;
  return kernel::reduced_dim_pieces(collapsed, grain_elements, kMaxReductionPieces);
}

bool has_feature(const std::string& features, const std::string& feature) {
  return ("," + features + ",").find("," + feature + ",") != std::string::npos;
}

int vector_bits_for(const std::string& features) {
  if (has_feature(features, "+avx512f")) return 512;
  if (has_feature(features, "+avx2") || has_feature(features, "+avx")) return 256;
  return 128;
}

}  // namespace kiln::codegen
