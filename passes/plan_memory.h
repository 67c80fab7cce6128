// Memory planning: intermediates whose lifetimes do not overlap share bytes of one arena.
//
// A value is planned when its producer can write into a given buffer (the runtime says which
// nodes can: those with an ATen out= variant), its layout is dense, and it does not escape (it is
// not a graph output, nor viewed by one). Its lifetime runs from its producer to its last use,
// where the uses of every view of it count as its own uses. Offsets are assigned greedily,
// largest first, at the lowest 64-byte aligned offset that does not overlap a placed buffer
// whose lifetime overlaps.
//
// A node may also write an output over one of its inputs (in place) when the caller says it can
// (a kernel that reads and writes each element at the same place, see kernel/in_place.h; a
// oneDNN convolution that adds into its residual, see onednn_conv.h) and
// the input is a planned intermediate that dies at that node: the output then takes the input's
// offset and extends its lifetime.
//
//   %a = aten::exp(%x)          a: offset 0, alive until the fused node
//   %b = kiln::fused(%a, %w)    b written over a (offset 0): no second buffer
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

/// Output `output` of `node` is written over its input `input` (indices into the node's lists).
struct InPlaceWrite {
  const ir::Node* node;
  int input;
  int output;
};

struct MemoryPlan {
  /// Indexed by Value id: the byte offset in the arena, or nullopt when not planned.
  std::vector<std::optional<int64_t>> offsets;
  int64_t arena_bytes = 0;
  /// What the planned values would take if each had its own buffer.
  int64_t unshared_bytes = 0;
  int num_planned = 0;
  std::vector<InPlaceWrite> in_place;

  bool is_planned(const ir::Value* value) const {
    return value->id() < static_cast<int>(offsets.size()) && offsets[value->id()].has_value();
  }
};

inline constexpr int64_t kPlanAlignment = 64;

/// (input index, output index) pairs of a node that may share memory, as in_place_candidates.
using InPlaceCandidates = std::function<std::vector<std::pair<int, int>>(const ir::Node&)>;

/// can_write_into_buffer(node): the runtime can make `node` write its output into a buffer.
/// in_place (optional): which outputs of a node could be written over which inputs.
MemoryPlan plan_memory(const ir::Graph& graph,
                       const std::function<bool(const ir::Node&)>& can_write_into_buffer,
                       const InPlaceCandidates& in_place = nullptr);

}  // namespace kiln
