// Memory planning: intermediates whose lifetimes do not overlap share bytes of one arena.
//
// A value is planned when its producer can write into a given buffer (the runtime says which
// nodes can: those with an ATen out= variant), its layout is dense, and it does not escape (it is
// not a graph output, nor viewed by one). Its lifetime runs from its producer to its last use,
// where the uses of every view of it count as its own uses. Offsets are assigned greedily,
// largest first, at the lowest 64-byte aligned offset that does not overlap a placed buffer
// whose lifetime overlaps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

struct MemoryPlan {
  /// Indexed by Value id: the byte offset in the arena, or nullopt when not planned.
  std::vector<std::optional<int64_t>> offsets;
  int64_t arena_bytes = 0;
  /// What the planned values would take if each had its own buffer.
  int64_t unshared_bytes = 0;
  int num_planned = 0;

  bool is_planned(const ir::Value* value) const {
    return value->id() < static_cast<int>(offsets.size()) && offsets[value->id()].has_value();
  }
};

inline constexpr int64_t kPlanAlignment = 64;

/// can_write_into_buffer(node): the runtime can make `node` write its output into a buffer.
MemoryPlan plan_memory(const ir::Graph& graph,
                       const std::function<bool(const ir::Node&)>& can_write_into_buffer);

}  // namespace kiln
