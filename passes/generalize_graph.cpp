#include "passes/generalize_graph.h"

#include <functional>
#include <unordered_map>

#include "passes/kernel/size_terms.h"

namespace kiln {
namespace {

/// Attributes that name something (a constant's tensor, a fused node's kernel) rather than
/// measure it: never fitted, compared as the rest of the structure.
bool names_something(const ir::Node& node, const std::string& attr) {
  return (node.op() == ir::kConstantOp && attr == "index") ||
         (node.op() == ir::kFusedOp && attr == "kernel");
}

/// Visits every integer integers() lists, in its order, letting `rewrite` replace it.
void rewrite_integers(ir::Graph& graph, const std::function<int64_t(int64_t)>& rewrite) {
  auto type = [&](ir::Value* v) {
    ir::TensorType t = v->type();
    for (int64_t& s : t.sizes)
      s = rewrite(s);
    for (int64_t& s : t.strides)
      s = rewrite(s);
    v->set_type(std::move(t));
  };
  for (ir::Value* v : graph.inputs())
    type(v);
  for (ir::Node* node : graph.nodes()) {
    for (ir::Value* v : node->outputs())
      type(v);
    const ir::AttrList attrs = node->attrs();  // set_attr writes into the node's own list
    for (auto [name, attr] : attrs) {
      if (names_something(*node, name)) continue;
      if (auto* i = std::get_if<int64_t>(&attr)) {
        node->set_attr(name, rewrite(*i));
      } else if (auto* list = std::get_if<std::vector<int64_t>>(&attr)) {
        for (int64_t& x : *list)
          x = rewrite(x);
        node->set_attr(name, std::move(*list));
      }
    }
    if (node->subgraph()) {
      std::shared_ptr<ir::Graph> body = node->subgraph()->clone();
      rewrite_integers(*body, rewrite);
      node->set_subgraph(std::move(body));
    }
  }
}

/// Whether two attributes are equal but for their integers (same alternative, same length).
bool same_but_integers(const ir::Attr& a, const ir::Attr& b) {
  if (a.index() != b.index()) return false;
  if (std::holds_alternative<int64_t>(a)) return true;
  if (auto* list = std::get_if<std::vector<int64_t>>(&a))
    return list->size() == std::get<std::vector<int64_t>>(b).size();
  return a == b;
}

std::string difference(const ir::Graph& a, const ir::Graph& b, const std::string& where) {
  std::unordered_map<const ir::Value*, const ir::Value*> to_a;
  auto same_type = [](const ir::Value* x, const ir::Value* y) {
    const ir::TensorType &s = x->type(), &t = y->type();
    return s.dtype == t.dtype && s.device == t.device && s.sizes.size() == t.sizes.size() &&
           s.strides.size() == t.strides.size();
  };
  if (a.inputs().size() != b.inputs().size()) return where + "their inputs differ in number";
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    if (!same_type(a.inputs()[i], b.inputs()[i]))
      return where + "input " + std::to_string(i) + " differs in dtype, device or rank";
    to_a[b.inputs()[i]] = a.inputs()[i];
  }
  const std::vector<ir::Node*> na = a.nodes(), nb = b.nodes();
  if (na.size() != nb.size())
    return where + "they have " + std::to_string(na.size()) + " and " + std::to_string(nb.size()) +
           " nodes";
  for (size_t n = 0; n < na.size(); ++n) {
    const ir::Node &x = *na[n], &y = *nb[n];
    const std::string node = where + "node " + std::to_string(n) + " (" + x.op() + ")";
    if (x.op() != y.op()) return node + " is " + y.op() + " in the other";
    if (x.inputs().size() != y.inputs().size() || x.outputs().size() != y.outputs().size())
      return node + " has other inputs or outputs";
    for (size_t i = 0; i < x.inputs().size(); ++i) {
      auto found = to_a.find(y.input(i));
      if (found == to_a.end() || found->second != x.input(i))
        return node + " reads another value at input " + std::to_string(i);
    }
    for (size_t i = 0; i < x.outputs().size(); ++i) {
      if (!same_type(x.output(i), y.output(i)))
        return node + "'s output " + std::to_string(i) + " differs in dtype, device or rank";
      to_a[y.output(i)] = x.output(i);
    }
    if (x.attrs().size() != y.attrs().size()) return node + " has other attributes";
    for (size_t k = 0; k < x.attrs().size(); ++k) {
      const auto& [name, attr] = x.attrs()[k];
      const auto& [other_name, other] = y.attrs()[k];
      const bool equal = names_something(x, name) ? attr == other : same_but_integers(attr, other);
      if (name != other_name || !equal)
        return node + "'s attribute " + name + " is " + ir::attr_string(attr) + " and " +
               ir::attr_string(other);
    }
    if (!x.subgraph() != !y.subgraph()) return node + " has a body in one graph only";
    if (x.subgraph()) {
      const std::string body = difference(*x.subgraph(), *y.subgraph(), node + "'s body: ");
      if (!body.empty()) return body;
    }
  }
  if (a.outputs().size() != b.outputs().size()) return where + "their outputs differ in number";
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    auto found = to_a.find(b.outputs()[i]);
    if (found == to_a.end() || found->second != a.outputs()[i])
      return where + "output " + std::to_string(i) + " is another value";
  }
  return "";
}

}  // namespace

std::vector<int64_t> integers(const ir::Graph& graph) {
  std::vector<int64_t> values;
  std::unique_ptr<ir::Graph> copy = graph.clone();
  rewrite_integers(*copy, [&](int64_t v) {
    values.push_back(v);
    return v;
  });
  return values;
}

std::string structure_difference(const ir::Graph& a, const ir::Graph& b) {
  return difference(a, b, "");
}

std::optional<GraphTemplate> generalize_graph(const std::vector<const ir::Graph*>& graphs,
                                              const kernel::Bindings& bindings,
                                              std::string& why_not) {
  if (graphs.empty() || graphs.size() != bindings.size()) {
    why_not = std::to_string(graphs.size()) + " graphs for " + std::to_string(bindings.size()) +
              " bindings";
    return std::nullopt;
  }
  std::vector<std::vector<int64_t>> values;
  for (size_t j = 0; j < graphs.size(); ++j) {
    if (j > 0) {
      const std::string difference = structure_difference(*graphs[0], *graphs[j]);
      if (!difference.empty()) {
        why_not = "the graphs at bindings 0 and " + std::to_string(j) + " differ: " + difference;
        return std::nullopt;
      }
    }
    values.push_back(integers(*graphs[j]));
  }
  GraphTemplate result;
  result.base = bindings[0];
  for (size_t i = 0; i < values[0].size(); ++i) {
    std::vector<int64_t> at;
    for (const auto& v : values)
      at.push_back(v[i]);
    const std::optional<kernel::SizeTerm> term = kernel::fit_term(at, bindings);
    if (!term) {
      why_not = kernel::no_term_reason("integer " + std::to_string(i) + " of the graph", at);
      return std::nullopt;
    }
    result.terms.push_back(kernel::as_field(*term));
  }
  result.graph = graphs[0]->clone();
  result.base_integers = std::move(values[0]);
  return result;
}

std::string template_difference(const GraphTemplate& graph_template, const ir::Graph& graph,
                                std::span<const int64_t> sizes) {
  const std::string structure = structure_difference(*graph_template.graph, graph);
  if (!structure.empty()) return structure;
  const std::vector<int64_t> actual = integers(graph);
  if (actual.size() != graph_template.terms.size())
    return "they have " + std::to_string(graph_template.terms.size()) + " and " +
           std::to_string(actual.size()) + " integers";
  for (size_t i = 0; i < actual.size(); ++i) {
    const std::optional<kernel::SizeTerm>& term = graph_template.terms[i];
    const int64_t expected =
        term ? kernel::evaluate(*term, sizes) : graph_template.base_integers.at(i);
    if (actual[i] != expected)
      return "integer " + std::to_string(i) + " is " + std::to_string(actual[i]) + ", not " +
             std::to_string(expected);
  }
  return "";
}

std::vector<const ir::Node*> nodes_with_terms(const GraphTemplate& graph_template,
                                              const ir::Graph& graph) {
  // The integers in integers() order, each with the node that owns it (none: a graph input).
  std::vector<const ir::Node*> owners;
  auto type = [&](const ir::Value* v, const ir::Node* owner) {
    owners.insert(owners.end(), v->type().sizes.size() + v->type().strides.size(), owner);
  };
  for (const ir::Value* v : graph.inputs())
    type(v, nullptr);
  for (const ir::Node* node : graph.nodes()) {
    for (const ir::Value* v : node->outputs())
      type(v, node);
    for (const auto& [name, attr] : node->attrs()) {
      if (names_something(*node, name)) continue;
      if (std::holds_alternative<int64_t>(attr)) owners.push_back(node);
      if (const auto* list = std::get_if<std::vector<int64_t>>(&attr))
        owners.insert(owners.end(), list->size(), node);
    }
    if (node->subgraph()) owners.insert(owners.end(), integers(*node->subgraph()).size(), node);
  }
  std::vector<const ir::Node*> moving;
  for (size_t i = 0; i < owners.size() && i < graph_template.terms.size(); ++i) {
    if (graph_template.terms[i] && owners[i] && (moving.empty() || moving.back() != owners[i]))
      moving.push_back(owners[i]);
  }
  return moving;
}

std::unique_ptr<ir::Graph> instantiate(const GraphTemplate& graph_template,
                                       std::span<const int64_t> sizes) {
  std::unique_ptr<ir::Graph> graph = graph_template.graph->clone();
  size_t i = 0;
  rewrite_integers(*graph, [&](int64_t v) {
    const std::optional<kernel::SizeTerm>& term = graph_template.terms.at(i++);
    return term ? kernel::evaluate(*term, sizes) : v;
  });
  return graph;
}

}  // namespace kiln
