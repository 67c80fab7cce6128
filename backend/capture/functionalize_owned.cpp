#include "backend/capture/functionalize_owned.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {
namespace {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// In-place ops whose functional form (the name without its `_`) takes the same arguments and
// computes the same values: elementwise ops, and the writes of `x[...] = v` (fill_, copy_,
// index_put_) and `x.zero_()`.
const std::unordered_set<std::string>& elementwise_in_place() {
  static const std::unordered_set<std::string> ops = {
      "aten::add_",         "aten::sub_",        "aten::mul_",      "aten::div_",
      "aten::relu_",        "aten::leaky_relu_", "aten::hardtanh_", "aten::hardswish_",
      "aten::hardsigmoid_", "aten::sigmoid_",    "aten::silu_",     "aten::mish_",
      "aten::elu_",         "aten::gelu_",       "aten::tanh_",     "aten::clamp_",
      "aten::clamp_min_",   "aten::clamp_max_",  "aten::neg_",      "aten::exp_",
      "aten::masked_fill_", "aten::fill_",       "aten::zero_",     "aten::copy_",
      "aten::index_put_"};
  return ops;
}

/// Whether a value of this type may be or hold a tensor (an object or Any may).
bool may_hold_tensor(const c10::TypePtr& type) {
  if (type->cast<c10::TensorType>() || type->kind() == c10::TypeKind::AnyType ||
      type->kind() == c10::TypeKind::ClassType) {
    return true;
  }
  for (const c10::TypePtr& contained : type->containedTypes()) {
    if (may_hold_tensor(contained)) return true;
  }
  return false;
}

/// Which values may share memory, by union: an op's result with the inputs its schema says it
/// aliases (a view, an in-place op's result, split's list), a list or tuple with what it holds
/// and what is taken out of it, and anything else without a schema (control flow, calls) with
/// all its inputs. Coarser than TorchScript's AliasDb, which puts the tensors of a list that a
/// view op returns (split's) in its wildcard set, aliased with every graph input, so that
/// nothing they come from could ever be written in place.
/// Only the nodes before a given one count: what comes after it can alias the memory it writes
/// only through its result or through values made before it, whose later uses are checked (a
/// tuple that returns its result beside another value does not make them aliases).
class AliasSets {
 public:
  AliasSets(const Graph& graph, const Node* stop) {
    for (const Node* node : graph.nodes()) {
      if (node == stop) break;
      add(node);
    }
  }

  bool same(const Value* a, const Value* b) { return find(a) == find(b); }

 private:
  void add(const Node* node) {
    for (const torch::jit::Block* block : node->blocks()) {
      for (const Node* inner : block->nodes())
        add(inner);
    }
    const auto kind = node->kind();
    const bool container =
        kind == torch::jit::prim::ListConstruct || kind == torch::jit::prim::TupleConstruct ||
        kind == torch::jit::prim::ListUnpack || kind == torch::jit::prim::TupleUnpack ||
        kind == torch::jit::prim::TupleIndex;
    const c10::FunctionSchema* schema = container ? nullptr : node->maybeSchema();
    for (size_t o = 0; o < node->outputs().size(); ++o) {
      const Value* out = node->output(o);
      if (!may_hold_tensor(out->type())) continue;
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        const Value* in = node->input(i);
        if (!may_hold_tensor(in->type())) continue;
        if (!schema || (aliases(schema->returns().at(o)) && aliases(schema->arguments().at(i)))) {
          unite(out, in);
        }
      }
    }
    if (!schema && !container) {  // control flow: what goes in may come out of its blocks
      for (const torch::jit::Block* block : node->blocks()) {
        for (const Value* v : block->outputs()) {
          for (const Value* out : node->outputs())
            unite(out, v);
        }
      }
    }
  }

  // Whether an argument or return is annotated as aliasing, itself or what it holds.
  static bool aliases(const c10::Argument& argument) {
    const c10::AliasInfo* info = argument.alias_info();
    return info && (!info->beforeSets().empty() || !info->containedTypes().empty());
  }

  const Value* find(const Value* v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    return it->second = find(it->second);
  }

  void unite(const Value* a, const Value* b) { parent_[find(a)] = find(b); }

  std::unordered_map<const Value*, const Value*> parent_;
};

/// Whether `node` is a view that a scatter op can write back into its input: slice and select,
/// what `x[a:b, i] = v` writes through.
bool is_scatterable_view(const Node* node) {
  const c10::FunctionSchema* schema = node->maybeSchema();
  if (!schema) return false;
  return (schema->name() == "aten::slice" && schema->overload_name() == "Tensor") ||
         (schema->name() == "aten::select" && schema->overload_name() == "int");
}

/// What an in-place op writes: `views` (outermost first) cut it from `base`, which no slice or
/// select made.
struct WrittenView {
  Value* base;
  std::vector<Node*> views;
};

WrittenView written_view(const Node* n) {
  WrittenView written{n->input(0), {}};
  while (is_scatterable_view(written.base->node())) {
    written.views.insert(written.views.begin(), written.base->node());
    written.base = written.base->node()->input(0);
  }
  return written;
}

/// Whether `n` writes memory only the graph holds, which nothing reads after it but through
/// `n`'s result or through the base of the views it writes into (those reads take the rewritten
/// result). Its other operands must not alias that memory (a partial overlap is eager's error).
bool writes_owned_memory(Graph& graph, const Node* n, const WrittenView& written) {
  AliasSets sets(graph, n);
  for (Value* input : graph.inputs()) {
    if (sets.same(input, written.base)) return false;
  }
  for (size_t i = 1; i < n->inputs().size(); ++i) {
    const Value* operand = n->input(i);
    if (operand != n->input(0) && may_hold_tensor(operand->type()) &&
        sets.same(operand, written.base)) {
      return false;
    }
  }
  bool base_read_after = false;
  for (Node* m : graph.block()->nodes()) {
    if (m == n) break;  // values made after `n` can alias the memory only through its result
    for (Value* w : m->outputs()) {
      if (!sets.same(w, written.base)) continue;
      const auto kind = m->kind();
      if (kind == torch::jit::prim::Constant || kind == torch::jit::prim::GetAttr) return false;
      for (const torch::jit::Use& use : w->uses()) {
        if (use.user == n || use.user->isBefore(n)) continue;
        if (w != written.base) return false;
        base_read_after = true;
      }
    }
  }
  // The result would then be a tensor of its own, no longer a view of what the base's readers
  // read: a later write into it could not reach them.
  return written.views.empty() || !base_read_after || !n->output()->hasUses();
}

/// The scatter that writes `src` back through `view` into the view's input.
Node* scatter_through(Graph& graph, Node* view, Value* src) {
  const bool slice = view->maybeSchema()->name() == "aten::slice";
  std::vector<Value*> args = {view->input(0), src};
  for (size_t i = 1; i < view->inputs().size(); ++i)
    args.push_back(view->input(i));
  Node* scatter = graph.create(
      slice ? torch::jit::aten::slice_scatter : torch::jit::aten::select_scatter, args, 1);
  scatter->output()->setType(view->input(0)->type());
  return scatter;
}

/// Replaces `n` by its functional form, written back through `written`'s views by scatters;
/// the base's later readers read the result. False (and nothing changed) where there is none.
bool make_functional(Graph& graph, Node* n, const WrittenView& written) {
  const std::string name = n->kind().toQualString();
  const auto functional = c10::Symbol::fromQualString(name.substr(0, name.size() - 1));
  std::vector<Node*> made = {graph.create(functional, n->inputs(), 1)};
  made.back()->output()->setType(n->output()->type());
  if (promotes_when_functional(*n)) {
    made.push_back(
        graph.create(torch::jit::aten::type_as, {made.back()->output(), n->input(0)}, 1));
    made.back()->output()->setType(n->output()->type());
  }
  Value* result = made.back()->output();
  for (auto view = written.views.rbegin(); view != written.views.rend(); ++view)
    made.push_back(scatter_through(graph, *view, made.back()->output()));
  for (Node* node : made) {
    if (!node->maybeSchema()) {
      for (Node* m : made)
        m->destroy();
      return false;
    }
    node->insertBefore(n);
  }
  written.base->replaceAllUsesAfterNodeWith(n, made.back()->output());
  n->output()->replaceAllUsesWith(result);
  n->destroy();
  return true;
}

}  // namespace

bool promotes_when_functional(const Node& n) {
  const std::string op = n.kind().toQualString();
  if (op != "aten::add_" && op != "aten::sub_" && op != "aten::mul_" && op != "aten::div_") {
    return false;
  }
  for (size_t i = 1; i < n.inputs().size(); ++i) {
    if (n.input(i)->type()->cast<c10::TensorType>()) return true;
  }
  return false;
}

int functionalize_owned(const std::shared_ptr<Graph>& graph) {
  int rewritten = 0;
  std::unordered_set<const Node*> kept;  // checked and left in place
  for (bool changed = true; changed;) {
    changed = false;
    for (Node* n : graph->block()->nodes()) {
      if (kept.contains(n) || n->outputs().size() != 1 || n->inputs().empty() ||
          !elementwise_in_place().contains(n->kind().toQualString())) {
        continue;
      }
      const WrittenView written = written_view(n);
      if (writes_owned_memory(*graph, n, written) && make_functional(*graph, n, written)) {
        ++rewritten;
        changed = true;
        break;
      }
      kept.insert(n);
    }
  }
  return rewritten;
}

}  // namespace kiln
