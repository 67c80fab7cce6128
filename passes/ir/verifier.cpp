#include "passes/ir/verifier.h"

#include <unordered_map>

#include "passes/ir/errors.h"
#include "passes/ir/op_table.h"

namespace kiln::ir {
namespace {

constexpr int kGraphInput = -1;

bool is_identifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Close to how the printer spells a value, so a message can be matched against a dump. (The
// printer also falls back to the id for duplicate names; a message does not need that.)
std::string ref(const Value* v) {
  return "%" + (is_identifier(v->name()) ? v->name() : std::to_string(v->id()));
}

std::string node_ref(int index, const Node* node) {
  return "node " + std::to_string(index) + " (" + node->op() + ")";
}

std::string count_range(int min, int max) {
  if (max < 0) return "at least " + std::to_string(min);
  if (min == max) return std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

class Verifier {
 public:
  explicit Verifier(const Graph& graph) : graph_(graph), nodes_(graph.nodes()) {}

  std::vector<std::string> run() {
    collect_definitions();
    for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
      check_uses(n);
      check_op(n);
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Value* v = graph_.outputs()[i];
      std::string what = "graph output " + std::to_string(i);
      if (v == nullptr) {
        problems_.push_back(what + " is null.");
      } else if (!definitions_.contains(v)) {
        problems_.push_back(what + " (" + ref(v) + ") is not defined in this graph.");
      }
    }
    return std::move(problems_);
  }

 private:
  std::string definer(int position) const {
    return position == kGraphInput ? "a graph input" : node_ref(position, nodes_[position]);
  }

  // Records where each value is first defined, so a later read can tell "defined later" from
  // "not defined here at all" (e.g. a value of another Graph).
  void collect_definitions() {
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* v = graph_.inputs()[i];
      std::string what = "graph input " + std::to_string(i);
      if (v == nullptr) {
        problems_.push_back(what + " is null.");
        continue;
      }
      define(v, kGraphInput);
      check_type(v, what + " (" + ref(v) + ")");
    }
    for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) {
      const auto& outputs = nodes_[n]->outputs();
      for (size_t i = 0; i < outputs.size(); ++i) {
        define(outputs[i], n);
        check_type(outputs[i], ref(outputs[i]) + " (output " + std::to_string(i) + " of node " +
                                   std::to_string(n) + ", " + nodes_[n]->op() + ")");
      }
    }
  }

  void define(const Value* v, int position) {
    auto [it, inserted] = definitions_.emplace(v, position);
    if (!inserted) {
      problems_.push_back(ref(v) + " is defined twice: by " + definer(it->second) + " and by " +
                          definer(position) + ".");
    }
  }

  void check_type(const Value* v, const std::string& what) {
    const TensorType& type = v->type();
    if (type.strides.size() != type.sizes.size()) {
      problems_.push_back("the type of " + what + " has " + std::to_string(type.strides.size()) +
                          " strides for " + std::to_string(type.sizes.size()) + " sizes.");
    }
    for (int64_t size : type.sizes) {
      if (size < 0) {
        problems_.push_back("the type of " + what + " has a negative size: " + type_string(type) +
                            ".");
        break;
      }
    }
  }

  void check_uses(int n) {
    const Node* node = nodes_[n];
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      const Value* v = node->inputs()[i];
      if (v == nullptr) {
        problems_.push_back(node_ref(n, node) + " has a null input " + std::to_string(i) + ".");
        continue;
      }
      auto it = definitions_.find(v);
      if (it == definitions_.end()) {
        problems_.push_back(node_ref(n, node) + " reads " + ref(v) +
                            ", which is not defined in this graph.");
      } else if (it->second == n) {
        problems_.push_back(node_ref(n, node) + " reads its own output " + ref(v) + ".");
      } else if (it->second > n) {
        problems_.push_back(node_ref(n, node) + " reads " + ref(v) + " before it is defined by " +
                            definer(it->second) + ".");
      }
    }
  }

  void check_op(int n) {
    const Node* node = nodes_[n];
    if (!is_qualified_op_name(node->op())) {
      problems_.push_back("node " + std::to_string(n) + " has the operator name '" + node->op() +
                          "', which is not of the form 'namespace::name[.overload]'.");
      return;
    }
    if (const OpInfo* info = find_op(node->op())) {
      int inputs = static_cast<int>(node->inputs().size());
      int outputs = static_cast<int>(node->outputs().size());
      if (inputs < info->min_inputs || (info->max_inputs >= 0 && inputs > info->max_inputs)) {
        problems_.push_back(node_ref(n, node) + " has " + std::to_string(inputs) +
                            " tensor inputs, but " + node->op() + " takes " +
                            count_range(info->min_inputs, info->max_inputs) + ".");
      }
      if (outputs != info->num_outputs) {
        problems_.push_back(node_ref(n, node) + " has " + std::to_string(outputs) +
                            " outputs, but " + node->op() + " produces " +
                            std::to_string(info->num_outputs) + ".");
      }
    }
    if (node->op() == kConstantOp) {
      const Attr* index = node->find_attr("index");
      if (index == nullptr || !std::holds_alternative<int64_t>(*index)) {
        problems_.push_back(node_ref(n, node) +
                            " has no integer attribute 'index' naming its frozen tensor.");
      } else if (std::get<int64_t>(*index) < 0) {
        problems_.push_back(node_ref(n, node) + " has the negative index " +
                            std::to_string(std::get<int64_t>(*index)) + ".");
      }
    }
  }

  const Graph& graph_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Value*, int> definitions_;
  std::vector<std::string> problems_;
};

}  // namespace

std::vector<std::string> verify_graph(const Graph& graph) {
  return Verifier(graph).run();
}

void check_graph(const Graph& graph, const std::string& after_pass) {
  std::vector<std::string> problems = verify_graph(graph);
  if (problems.empty()) return;
  std::string message = after_pass.empty() ? "graph IR is invalid:"
                                           : "graph IR is invalid after pass '" + after_pass + "':";
  for (const std::string& problem : problems)
    message += "\n  - " + problem;
  throw VerifyError(message);
}

}  // namespace kiln::ir
