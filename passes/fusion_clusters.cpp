#include "passes/fusion_clusters.h"

#include <algorithm>
#include <queue>

#include "passes/ir/op_table.h"
#include "passes/kernel/lower_ops.h"
#include "passes/kernel/size_decisions.h"

namespace kiln {

bool runs_on_one_device(const ir::Node& node) {
  const ir::Device device = node.output()->type().device;
  if (device.kind != ir::DeviceKind::CPU && device.kind != ir::DeviceKind::CUDA) return false;
  return std::all_of(node.inputs().begin(), node.inputs().end(),
                     [&](const ir::Value* v) { return v->type().device == device; });
}

bool is_fusible_elementwise(const ir::Node& node) {
  if (node.op() == kFusedOp || !kernel::can_lower(node) || kernel::reduced_dims(node)) return false;
  return runs_on_one_device(node);
}

bool broadcasts_to(const std::vector<int64_t>& shape, const std::vector<int64_t>& target) {
  if (shape.size() > target.size()) return false;
  const size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && shape[i] != target[offset + i]) return false;
  }
  return true;
}

namespace {

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

// A group computes each member once per element of its iteration space, so a member of a smaller
// shape is recomputed for every element it is broadcast to. Cheap ops pay for that less than a
// kernel of their own costs (a step, ~1 us); a transcendental one (sigmoid, exp, tanh: ~20
// vector instructions an element) recomputed over more than this many extra elements costs more:
// a squeeze-excitation gate's sigmoid over [1, 32, 1, 1] fused into its multiply by a
// [1, 32, 112, 112] map took that multiply from 30 to 104 us.
constexpr int64_t kMaxTranscendentalRecompute = 4096;

bool worth_recomputing(const ir::Node& node, const std::vector<int64_t>& shape) {
  return !kernel::computes_transcendental(node) ||
         kernel::difference_at_most(
             numel(shape), numel(node.output()->type().sizes), kMaxTranscendentalRecompute,
             "the elements a transcendental op is recomputed for, to fuse it");
}

}  // namespace

void grow_elementwise(ClusterGrower& grower, const std::vector<int64_t>& shape) {
  bool grew = true;
  while (grew) {
    grew = false;
    for (ir::Node* node : grower.neighbors()) {
      if (!is_fusible_elementwise(*node)) continue;
      const auto& sizes = node->output()->type().sizes;
      const bool fits = sizes == shape ||
                        (broadcasts_to(sizes, shape) && grower.used_only_inside(node->output()) &&
                         worth_recomputing(*node, shape));
      if (fits && grower.try_add(node)) grew = true;
    }
  }
}

bool is_fusion_barrier(const ir::Node& node) {
  return node.op() != kFusedOp && ir::find_op(node.op()) == nullptr;
}

ClusterGrower::ClusterGrower(const ir::Graph& graph) {
  int64_t position = 0;
  for (ir::Node* node : graph.nodes()) {
    position_[node] = position;
    if (is_fusion_barrier(*node)) barriers_.push_back(position);
    for (const ir::Value* v : node->inputs()) {
      auto& list = users_[v];
      if (std::find(list.begin(), list.end(), node) == list.end()) list.push_back(node);
    }
    ++position;
  }
  outputs_.insert(graph.outputs().begin(), graph.outputs().end());
}

void ClusterGrower::start(ir::Node* seed) {
  members_ = {seed};
  order_ = {seed};
  first_ = last_ = position_.at(seed);
}

const std::vector<ir::Node*>& ClusterGrower::users(const ir::Value* value) const {
  static const std::vector<ir::Node*> kNone;
  auto found = users_.find(value);
  return found == users_.end() ? kNone : found->second;
}

bool ClusterGrower::used_only_inside(const ir::Value* value) const {
  if (is_graph_output(value)) return false;
  const auto& readers = users(value);
  return std::all_of(readers.begin(), readers.end(), [&](ir::Node* n) { return contains(n); });
}

std::vector<ir::Node*> ClusterGrower::neighbors() const {
  std::vector<ir::Node*> found;
  auto add = [&](ir::Node* n) {
    if (n && !contains(n) && std::find(found.begin(), found.end(), n) == found.end())
      found.push_back(n);
  };
  for (ir::Node* member : order_) {
    for (ir::Value* v : member->inputs())
      add(v->producer());
    for (ir::Value* v : member->outputs())
      for (ir::Node* user : users(v))
        add(user);
  }
  std::sort(found.begin(), found.end(),
            [&](ir::Node* a, ir::Node* b) { return position_.at(a) < position_.at(b); });
  return found;
}

bool ClusterGrower::barrier_between(int64_t first, int64_t last) const {
  auto it = std::lower_bound(barriers_.begin(), barriers_.end(), first);
  return it != barriers_.end() && *it <= last;
}

// Walks from `from` through non-members (towards producers or users), within the cluster's
// span of positions, and says whether it meets a member.
bool ClusterGrower::reaches_member(ir::Node* from, bool forward) const {
  std::vector<ir::Node*> stack = {from};
  std::unordered_set<const ir::Node*> seen;
  while (!stack.empty()) {
    ir::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (contains(node)) return true;
    const int64_t pos = position_.at(node);
    if (pos < first_ || pos > last_) continue;  // nothing beyond the span can lead back
    if (forward) {
      for (ir::Value* v : node->outputs())
        for (ir::Node* user : users(v))
          stack.push_back(user);
    } else {
      for (ir::Value* v : node->inputs())
        if (v->producer()) stack.push_back(v->producer());
    }
  }
  return false;
}

bool ClusterGrower::try_add(ir::Node* node) {
  if (contains(node)) return true;
  const int64_t pos = position_.at(node);
  const int64_t first = std::min(first_, pos), last = std::max(last_, pos);
  if (barrier_between(first, last)) return false;
  // Convex: no path member -> outside -> node, nor node -> outside -> member.
  const int64_t saved_first = first_, saved_last = last_;
  first_ = first;
  last_ = last;
  bool cycle = false;
  for (ir::Value* v : node->inputs()) {
    ir::Node* producer = v->producer();
    if (producer && !contains(producer)) cycle = cycle || reaches_member(producer, false);
  }
  for (ir::Value* v : node->outputs()) {
    for (ir::Node* user : users(v)) {
      if (!contains(user)) cycle = cycle || reaches_member(user, true);
    }
  }
  if (cycle) {
    first_ = saved_first;
    last_ = saved_last;
    return false;
  }
  members_.insert(node);
  order_.push_back(node);
  std::sort(order_.begin(), order_.end(),
            [&](ir::Node* a, ir::Node* b) { return position_.at(a) < position_.at(b); });
  return true;
}

namespace {

// Kahn's algorithm, always taking the ready node that came first: nodes keep their order
// except where the new node's inputs force a move.
std::vector<ir::Node*> stable_topological_order(
    const ir::Graph& graph, const std::unordered_map<const ir::Node*, int64_t>& priority) {
  std::vector<ir::Node*> nodes = graph.nodes();
  std::unordered_map<const ir::Value*, ir::Node*> producer;
  for (ir::Node* n : nodes)
    for (const ir::Value* v : n->outputs())
      producer[v] = n;
  std::unordered_map<const ir::Node*, int> pending;
  std::unordered_map<const ir::Node*, std::vector<ir::Node*>> dependents;
  for (ir::Node* n : nodes) {
    std::unordered_set<const ir::Node*> deps;
    for (const ir::Value* v : n->inputs()) {
      auto p = producer.find(v);
      if (p != producer.end() && deps.insert(p->second).second) dependents[p->second].push_back(n);
    }
    pending[n] = static_cast<int>(deps.size());
  }
  auto later = [&](ir::Node* a, ir::Node* b) { return priority.at(a) > priority.at(b); };
  std::priority_queue<ir::Node*, std::vector<ir::Node*>, decltype(later)> ready(later);
  for (ir::Node* n : nodes)
    if (pending[n] == 0) ready.push(n);
  std::vector<ir::Node*> order;
  while (!ready.empty()) {
    ir::Node* n = ready.top();
    ready.pop();
    order.push_back(n);
    for (ir::Node* d : dependents[n])
      if (--pending[d] == 0) ready.push(d);
  }
  return order;
}

}  // namespace

ir::Node* contract_cluster(ir::Graph& graph, const std::vector<ir::Node*>& members,
                           ir::AttrList attrs) {
  std::unordered_set<const ir::Node*> inside(members.begin(), members.end());
  std::unordered_set<const ir::Value*> defined;
  for (const ir::Node* m : members)
    defined.insert(m->outputs().begin(), m->outputs().end());

  // The body: one input per outside value the members read, copies of the members in order.
  auto body = std::make_shared<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> mapped;
  std::vector<ir::Value*> inputs;
  for (const ir::Node* m : members) {
    for (ir::Value* v : m->inputs()) {
      if (defined.contains(v) || mapped.contains(v)) continue;
      mapped[v] = body->add_input(v->type(), v->name());
      inputs.push_back(v);
    }
  }
  for (const ir::Node* m : members) {
    std::vector<ir::Value*> args;
    for (ir::Value* v : m->inputs())
      args.push_back(mapped.at(v));
    std::vector<ir::TensorType> types;
    for (const ir::Value* v : m->outputs())
      types.push_back(v->type());
    ir::Node* copy = body->append(m->op(), args, types, m->attrs());
    for (size_t i = 0; i < m->outputs().size(); ++i) {
      copy->output(i)->set_name(m->output(i)->name());
      mapped[m->output(i)] = copy->output(i);
    }
  }

  // The group's outputs: member values read outside it or returned by the graph.
  std::unordered_set<const ir::Value*> escaping(graph.outputs().begin(), graph.outputs().end());
  for (const ir::Node* n : graph.nodes()) {
    if (inside.contains(n)) continue;
    escaping.insert(n->inputs().begin(), n->inputs().end());
  }
  std::vector<ir::Value*> results;
  for (const ir::Node* m : members)
    for (ir::Value* v : m->outputs())
      if (escaping.contains(v)) results.push_back(v);
  std::vector<ir::Value*> body_outputs;
  std::vector<ir::TensorType> types;
  for (ir::Value* v : results) {
    body_outputs.push_back(mapped.at(v));
    types.push_back(v->type());
  }
  body->set_outputs(body_outputs);

  std::unordered_map<const ir::Node*, int64_t> priority;
  int64_t position = 0, first_member = -1;
  for (const ir::Node* n : graph.nodes()) {
    if (inside.contains(n) && first_member < 0) first_member = position;
    priority[n] = position++;
  }
  ir::Node* fused = graph.append(kFusedOp, inputs, types, std::move(attrs));
  fused->set_subgraph(body);
  for (size_t i = 0; i < results.size(); ++i) {
    fused->output(i)->set_name(results[i]->name());
    graph.replace_all_uses(results[i], fused->output(i));
  }
  graph.remove_nodes_if([&](const ir::Node& n) { return inside.contains(&n); });
  priority[fused] = first_member;
  graph.set_node_order(stable_topological_order(graph, priority));
  return fused;
}

void inline_fused_node(ir::Graph& graph, ir::Node* fused, const std::string& reason) {
  const ir::Graph& body = *fused->subgraph();
  std::unordered_map<const ir::Node*, int64_t> priority;
  int64_t position = 0, fused_position = 0;
  for (const ir::Node* n : graph.nodes()) {
    if (n == fused) fused_position = position;
    priority[n] = position++ * (static_cast<int64_t>(body.num_nodes()) + 1);
  }
  std::unordered_map<const ir::Value*, ir::Value*> mapped;
  for (size_t i = 0; i < body.inputs().size(); ++i)
    mapped[body.inputs()[i]] = fused->input(i);
  int64_t k = 0;
  for (const ir::Node* n : body.nodes()) {
    std::vector<ir::Value*> args;
    for (const ir::Value* v : n->inputs())
      args.push_back(mapped.at(v));
    std::vector<ir::TensorType> types;
    for (const ir::Value* v : n->outputs())
      types.push_back(v->type());
    ir::Node* copy = graph.append(n->op(), args, types, n->attrs());
    if (!reason.empty()) copy->set_attr(kUnfusedAttr, reason);
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      copy->output(i)->set_name(n->output(i)->name());
      mapped[n->output(i)] = copy->output(i);
    }
    priority[copy] = fused_position * (static_cast<int64_t>(body.num_nodes()) + 1) + k++;
  }
  for (size_t i = 0; i < fused->outputs().size(); ++i)
    graph.replace_all_uses(fused->output(i), mapped.at(body.outputs()[i]));
  graph.remove_nodes_if([&](const ir::Node& n) { return &n == fused; });
  graph.set_node_order(stable_topological_order(graph, priority));
}

}  // namespace kiln
