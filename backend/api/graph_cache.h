// Optimized graphs kept between processes. A region's graph after the graph passes
// (canonicalize to eliminate_common_subexpressions, passes/pipeline.h), with the constants it then
// reads (folded batch norms, packed oneDNN weights, Winograd's transformed ones), is stored in
// the disk cache and in the code bundle in use (a package's), so that a later compile of the same
// region and weights skips those passes: most of a compile's pass time.
//
// Frozen weights are data, not structure: two checkpoints of one architecture import to the same
// graph IR, so the key hashes the contents of every constant as well as the graph, and one model
// is never handed another's folded or packed weights. The key also holds everything else the
// passes' result depends on: the pipeline's switches, the device, the thread count (oneDNN packs
// weights per thread count), the CPU and its features, torch's version and kiln's build.
#pragma once

#include <ATen/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/pipeline.h"

namespace kiln {

struct CachedGraph {
  std::unique_ptr<ir::Graph> graph;
  std::vector<at::Tensor> constants;  // what its prim::Constant nodes' `index` attributes name
  int layout_conversions = 0;
};

/// The key of `graph`'s optimized form (before any pass runs) with these constants, or empty
/// when there is nowhere to keep it (no disk cache and no bundle in use, a constant not on the
/// CPU or not dense, kiln built without LLVM).
std::string graph_key(const ir::Graph& graph, const std::vector<at::Tensor>& constants,
                      const PipelineOptions& options);

/// The optimized graph stored under `key` (the bundle in use first, then the disk cache), or
/// nothing. An entry that does not read is deleted and logged.
std::optional<CachedGraph> load_graph(const std::string& key);

/// Stores `graph` (after the graph passes, which took `pass_seconds`) and the constants it reads
/// under `key`, in the bundle in use and, where it pays, in the disk cache. `constants` is
/// indexed as the graph's nodes say; only those the graph still reads are stored.
///
/// Where it pays: a warm compile checks every byte of the entry (~0.15 ms per MB) and the cold
/// one writes them (~4 ms per MB where the page cache takes 250 MB/s), so the disk cache keeps a
/// graph only when its passes took at least 1 ms per MB of it: ResNet-50's (0.26 s of passes,
/// 194 MB) yes, a BERT encoder's (tens of ms of passes for a hundred MB of linear weights) no.
/// A package keeps every graph: it is read whole anyway.
void store_graph(const std::string& key, const ir::Graph& graph,
                 const std::vector<at::Tensor>& constants, int layout_conversions,
                 double pass_seconds);

/// Deletes the disk cache's entry: its plan failed when it ran.
void forget_graph(const std::string& key);

}  // namespace kiln
