// What a shape class's pipeline may fold into constants, and which constants may differ between
// its bindings (compile_class.h). A class's graphs must read the same constants at every binding,
// so a value that follows the sizes must stay an op of the graph, computed per call.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "passes/generalize_graph.h"
#include "passes/ir/graph.h"

namespace kiln {

/// Whether `node` computes a value shaped by one of `sizes`: an integer attribute holds a size
/// that is also a dim of an output (`position_ids[:, :tokens]` is [1, tokens] and slices to
/// `tokens`). An attribute alone is not enough: a convolution's stride or padding equals a batch
/// of 2 or 3 by chance, and a weight packed for an input size keeps its own shape. An op that
/// reads an input for its type alone (`zeros_like(x)`: `type_only`) takes its shape from that
/// input, whose dims may be any of the sizes.
bool shaped_by_a_size(const ir::Node& node, const std::vector<int64_t>& sizes, bool type_only);

/// The values of the integers of `imported` (a class's import template) that stay at every
/// binding, sorted.
std::vector<int64_t> staying_integers(const GraphTemplate& imported);

/// Per import (the same graph at several bindings, `imported` their template): the values its
/// integers that move with the sizes take there (dims, strides, attributes), less any value an
/// integer that stays takes, sorted. A decoder's causal mask is [1, P + 1] and compares positions
/// with `arange(1) + P`: neither is a size input, both move. (A static dim or attribute equal to
/// such a value at one binding only would make the graphs differ, and there would be no class
/// from that base.)
std::vector<std::vector<int64_t>> moving_integers(const GraphTemplate& imported,
                                                  const std::vector<const ir::Graph*>& imports);

/// Whether an integer attribute of `node` is among `moving` (sorted; the attributes that say
/// which input a weight is packed for aside), or (`type_only`: it reads an input for its type
/// alone, as `zeros_like(x)` does) an output dim is: its value follows the sizes. Otherwise a
/// node folded from constants has their shapes and its attributes to go by: an output dim equal
/// to a moving value by chance (Winograd's 36 points, a stage 36 high) does not make it follow
/// the sizes.
bool follows_the_sizes(const ir::Node& node, const std::vector<int64_t>& moving, bool type_only);

/// The nodes of an import (the region's graph before any pass, at one binding of a class), told
/// apart from those the passes add later by their outputs: a graph's values are numbered in
/// order of creation and never removed.
struct ImportedNodes {
  int values = 0;                        // the import's values: ids below it
  std::vector<const ir::Value*> moving;  // sorted: outputs of nodes with an integer that moves
  bool has(const ir::Node& node) const;
  bool moves(const ir::Node& node) const;
};

/// `graph` (an import, before the passes run on it) against its class's import template.
ImportedNodes imported_nodes_of(const GraphTemplate& imported, const ir::Graph& graph);

/// Why the constants `graph` reads differ between two bindings' constants `a` and `b` (an
/// imported weight is the same tensor at both; one the passes folded must hold the same values,
/// but for a weight packed for oneDNN, whose op packs it again where its layout differs), or
/// empty. The graphs are the same but for their integers, so they read the same indices.
std::string constants_difference(const ir::Graph& graph, const std::vector<at::Tensor>& a,
                                 const std::vector<at::Tensor>& b);

}  // namespace kiln
