#include "passes/ir/printer.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln::ir {
namespace {

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Decides once, for the whole graph, how each value is spelled. A debug name is used only when
// it is an identifier (so it can never look like an id, which is all digits) and no other value
// carries it: a name shared by two values would make the parser see a redefinition.
class ValueNames {
 public:
  explicit ValueNames(const Graph& graph) {
    std::vector<const Value*> values;
    std::unordered_set<const Value*> seen;
    auto add = [&](const Value* v) {
      if (v != nullptr && seen.insert(v).second) values.push_back(v);
    };
    for (const Value* v : graph.inputs())
      add(v);
    for (const Node* node : graph.nodes()) {
      for (const Value* v : node->outputs())
        add(v);
    }
    // Values read but not defined here (a malformed graph) still get a spelling.
    for (const Node* node : graph.nodes()) {
      for (const Value* v : node->inputs())
        add(v);
    }
    for (const Value* v : graph.outputs())
      add(v);

    std::unordered_map<std::string, int> uses;
    for (const Value* v : values) {
      if (is_identifier(v->name())) ++uses[v->name()];
    }
    for (const Value* v : values) {
      bool unique_name = is_identifier(v->name()) && uses[v->name()] == 1;
      names_[v] = "%" + (unique_name ? v->name() : std::to_string(v->id()));
    }
  }

  const std::string& operator()(const Value* v) const {
    static const std::string kNull = "%<null>";
    if (v == nullptr) return kNull;
    return names_.at(v);
  }

 private:
  std::unordered_map<const Value*, std::string> names_;
};

void print_typed(std::ostream& out, const ValueNames& names, const std::vector<Value*>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out << ", ";
    out << names(values[i]) << " : " << type_string(values[i]->type());
  }
}

void print_refs(std::ostream& out, const ValueNames& names, const std::vector<Value*>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    out << (i ? ", " : "") << names(values[i]);
}

std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size() - 1;
    out += indent + text.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string print_graph(const Graph& graph) {
  ValueNames names(graph);
  std::ostringstream out;
  out << "graph(";
  print_typed(out, names, graph.inputs());
  out << "):\n";
  for (const Node* node : graph.nodes()) {
    out << "  ";
    // A node without outputs is printed as a bare call; the parser accepts that form.
    if (!node->outputs().empty()) {
      print_typed(out, names, node->outputs());
      out << " = ";
    }
    out << node->op() << "(";
    print_refs(out, names, node->inputs());
    out << ")";
    if (!node->attrs().empty()) {
      out << " {";
      for (size_t i = 0; i < node->attrs().size(); ++i) {
        const auto& [key, value] = node->attrs()[i];
        out << (i ? ", " : "") << key << "=" << attr_string(value);
      }
      out << "}";
    }
    out << "\n";
    // A group's body follows it, indented; the parser reads graphs without bodies only.
    if (node->subgraph()) out << indented(print_graph(*node->subgraph()), "    ");
  }
  out << "  return (";
  print_refs(out, names, graph.outputs());
  out << ")\n";
  return out.str();
}

}  // namespace kiln::ir
