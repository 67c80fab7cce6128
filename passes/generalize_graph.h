// One graph for every binding of a region's size inputs: the optimized graphs the pipeline makes
// at several bindings, generalized as passes/kernel/generalize.h generalizes kernels.
//
// The pipeline at a base binding, then once per size input moved alone, gives graphs that differ
// only in their integers when no size-dependent decision came out differently: the sizes and
// strides of every value's type, integer attributes (a view's shape, a prepacked weight's input
// size), and the same inside fusion groups' bodies. Each integer that differs is fitted to a
// term of the size inputs (kernel::fit_term); everything else must be equal. The template
// then instantiates the graph at any binding: what the pipeline would have made there, as long
// as its decisions would have come out the same (a template is a shape class's plan: the size
// guards that say where that holds are the class's to check).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/kernel/generalize.h"

namespace kiln {

struct GraphTemplate {
  std::unique_ptr<ir::Graph> graph;  // at the base binding
  std::vector<int64_t> base;         // the base binding
  /// Per integer of the graph (in integers() order): its term, or none where it is the same at
  /// every binding.
  std::vector<std::optional<kernel::SizeTerm>> terms;
  std::vector<int64_t> base_integers;  // integers() of `graph`
};

/// Every integer of the graph a binding may change, in a fixed order: each value's sizes and
/// strides (graph inputs, then node outputs in order), each node's integer and integer-list
/// attributes, and the same in fusion bodies, depth first. A prim::Constant's index and a fused
/// node's kernel index are left out: they name things, and must be equal.
std::vector<int64_t> integers(const ir::Graph& graph);

/// Why `a` and `b` differ in more than their integers (op, wiring, dtype, device, rank, a
/// non-integer attribute, a constant's index, a kernel index), or empty.
std::string structure_difference(const ir::Graph& a, const ir::Graph& b);

/// `graphs[j]` is the pipeline's graph at `bindings[j]` (laid out as kernel::Bindings says).
/// The template, or why there is none (in `why_not`).
std::optional<GraphTemplate> generalize_graph(const std::vector<const ir::Graph*>& graphs,
                                              const kernel::Bindings& bindings,
                                              std::string& why_not);

/// Why `graph` is not the template's graph at `sizes`: how their structure differs, or the first
/// integer that is not its term's value there (a floored size the fit took for a constant, as
/// `H // 4` is at three heights in a row). Empty when it is.
std::string template_difference(const GraphTemplate& graph_template, const ir::Graph& graph,
                                std::span<const int64_t> sizes);

/// The nodes of `graph` (the template's graph at some binding: the same structure) that own an
/// integer the template fits to a term: an output size or stride, or an attribute, that moves
/// with the sizes.
std::vector<const ir::Node*> nodes_with_terms(const GraphTemplate& graph_template,
                                              const ir::Graph& graph);

/// The template's graph at `sizes` (one per size input).
std::unique_ptr<ir::Graph> instantiate(const GraphTemplate& graph_template,
                                       std::span<const int64_t> sizes);

}  // namespace kiln
