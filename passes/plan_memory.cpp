#include "passes/plan_memory.h"

#include <algorithm>
#include <numeric>

#include "passes/ir/op_table.h"

namespace kiln {
namespace {

int64_t align_up(int64_t bytes) {
  return (bytes + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

struct Interval {
  int value;
  int first;  // position of the producer
  int last;   // position of the last use of the value or of any view of it
  int64_t bytes;
  int64_t offset = -1;
  bool overlaps_in_time(const Interval& other) const {
    return first <= other.last && other.first <= last;
  }
};

}  // namespace

MemoryPlan plan_memory(const ir::Graph& graph,
                       const std::function<bool(const ir::Node&)>& can_write_into_buffer,
                       const InPlaceCandidates& in_place) {
  const auto nodes = graph.nodes();
  const int n = graph.num_values();
  // root[v]: the value whose memory v uses (itself, or the base of the view it is).
  std::vector<int> root(n);
  std::iota(root.begin(), root.end(), 0);
  std::vector<int> last_use(n, -1);
  std::vector<bool> escapes(n, false);

  for (int pos = 0; pos < static_cast<int>(nodes.size()); ++pos) {
    const ir::Node* node = nodes[pos];
    for (const ir::Value* in : node->inputs()) {
      last_use[root[in->id()]] = std::max(last_use[root[in->id()]], pos);
    }
    const ir::OpInfo* info = ir::find_op(node->op());
    if (info && info->kind == ir::OpKind::View && !node->inputs().empty()) {
      for (const ir::Value* out : node->outputs())
        root[out->id()] = root[node->input(0)->id()];
    }
  }
  for (const ir::Value* out : graph.outputs())
    escapes[root[out->id()]] = true;

  auto plannable = [&](const ir::Value* v) {
    const int id = v->id();
    return root[id] == id && !escapes[id] && v->type().is_non_overlapping_and_dense() &&
           v->type().storage_bytes() > 0;
  };
  std::vector<Interval> intervals;
  std::vector<int> interval_of(n, -1);   // value id -> its interval
  std::vector<int> written_over(n, -1);  // output id -> the input whose memory it takes
  std::vector<InPlaceWrite> in_place_writes;
  for (int pos = 0; pos < static_cast<int>(nodes.size()); ++pos) {
    const ir::Node* node = nodes[pos];
    if (node->outputs().empty() || !can_write_into_buffer(*node)) continue;
    std::vector<bool> input_taken(node->inputs().size(), false);
    const auto candidates = in_place ? in_place(*node) : std::vector<std::pair<int, int>>{};
    for (int o = 0; o < static_cast<int>(node->outputs().size()); ++o) {
      const ir::Value* out = node->output(o);
      const int id = out->id();
      if (!plannable(out)) continue;
      const int64_t bytes = out->type().storage_bytes();
      const int last = std::max(pos, last_use[id]);
      bool placed_in_place = false;
      for (const auto& [i, candidate_output] : candidates) {
        if (candidate_output != o || input_taken[i]) continue;
        const ir::Value* in = node->input(i);
        const int slot = interval_of[in->id()];
        // The input must be an arena buffer that nothing reads after this node, passed once.
        if (slot < 0 || last_use[in->id()] != pos || intervals[slot].bytes != bytes) continue;
        if (std::count(node->inputs().begin(), node->inputs().end(), in) != 1) continue;
        input_taken[i] = true;
        intervals[slot].last = std::max(intervals[slot].last, last);
        interval_of[id] = slot;
        written_over[id] = in->id();
        in_place_writes.push_back({node, i, o});
        placed_in_place = true;
        break;
      }
      if (placed_in_place) continue;
      interval_of[id] = static_cast<int>(intervals.size());
      intervals.push_back({id, pos, last, bytes});
    }
  }

  // Largest first; each at the lowest aligned offset clear of every placed buffer that is alive
  // at the same time.
  std::stable_sort(intervals.begin(), intervals.end(),
                   [](const Interval& a, const Interval& b) { return a.bytes > b.bytes; });
  MemoryPlan plan;
  plan.offsets.assign(n, std::nullopt);
  std::vector<const Interval*> placed;
  for (Interval& interval : intervals) {
    std::vector<const Interval*> conflicts;
    for (const Interval* other : placed) {
      if (interval.overlaps_in_time(*other)) conflicts.push_back(other);
    }
    std::sort(conflicts.begin(), conflicts.end(),
              [](const Interval* a, const Interval* b) { return a->offset < b->offset; });
    int64_t offset = 0;
    for (const Interval* other : conflicts) {
      if (offset + interval.bytes <= other->offset) break;
      offset = std::max(offset, align_up(other->offset + other->bytes));
    }
    interval.offset = offset;
    placed.push_back(&interval);
    plan.offsets[interval.value] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, align_up(offset + interval.bytes));
    plan.unshared_bytes += align_up(interval.bytes);
    ++plan.num_planned;
  }
  // Values written in place share the offset of the input they overwrite (which may itself be
  // an in-place output: its offset is set above, as inputs come before outputs).
  for (const InPlaceWrite& write : in_place_writes) {
    const ir::Value* out = write.node->output(write.output);
    const int64_t offset = *plan.offsets[written_over[out->id()]];
    plan.offsets[out->id()] = offset;
    plan.unshared_bytes += align_up(out->type().storage_bytes());
    ++plan.num_planned;
  }
  plan.in_place = std::move(in_place_writes);
  return plan;
}

}  // namespace kiln
