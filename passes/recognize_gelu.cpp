#include "passes/recognize_gelu.h"

#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr double kSqrtTwoOverPi = 0.7978845608028654;
constexpr double kCubeCoefficient = 0.044715;

// Constants as models write them (math.sqrt(2 / math.pi), or 0.7978845608 rounded in source).
bool near(double value, double constant) {
  return std::fabs(value - constant) <= 1e-9 * std::fabs(constant) + 1e-10;
}

bool has_number(const Node& node, const char* name, double constant) {
  const auto value = number_attr(node, name);
  return value && near(*value, constant);
}

class GeluRecognizer {
 public:
  explicit GeluRecognizer(ir::Graph& graph) : graph_(graph), uses_(ir::count_uses(graph)) {}

  int run() {
    int found = 0;
    for (Node* node : graph_.nodes()) {
      if (node->op() == "aten::mul.Tensor" && rewrite(*node)) ++found;
    }
    graph_.remove_nodes_if([&](const Node& n) { return dead_.contains(&n); });
    return found;
  }

 private:
  // The node that makes `v` when it is an `op` node whose result only the pattern reads.
  Node* inner(const Value* v, const char* op) const {
    Node* p = v->producer();
    if (!p || p->op() != op || p->outputs().size() != 1) return nullptr;
    auto it = uses_.find(v);
    return it != uses_.end() && it->second == 1 ? p : nullptr;
  }

  static bool unit_alpha(const Node& node) {
    const auto alpha = number_attr(node, "alpha");
    return !alpha || *alpha == 1.0;
  }

  // `half` is x * 0.5 and `one_plus` is 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)): x, or null.
  Value* match(const Value* half, const Value* one_plus) {
    Node* h = inner(half, "aten::mul.Scalar");
    Node* o = inner(one_plus, "aten::add.Scalar");
    if (!h || !o || !has_number(*h, "other", 0.5) || !has_number(*o, "other", 1.0) ||
        !unit_alpha(*o)) {
      return nullptr;
    }
    Value* x = h->input(0);
    Node* t = inner(o->input(0), "aten::tanh");
    Node* u = t ? inner(t->input(0), "aten::mul.Scalar") : nullptr;
    Node* s = u && has_number(*u, "other", kSqrtTwoOverPi) ? inner(u->input(0), "aten::add.Tensor")
                                                           : nullptr;
    if (!s || !unit_alpha(*s)) return nullptr;
    // x + c or c + x, c = x^3 * 0.044715.
    for (int side = 0; side < 2; ++side) {
      if (s->input(side) != x) continue;
      Node* c = inner(s->input(1 - side), "aten::mul.Scalar");
      Node* p = c && has_number(*c, "other", kCubeCoefficient)
                    ? inner(c->input(0), "aten::pow.Tensor_Scalar")
                    : nullptr;
      if (p && p->input(0) == x && has_number(*p, "exponent", 3.0)) {
        pattern_ = {h, o, t, u, s, c, p};
        return x;
      }
    }
    return nullptr;
  }

  bool rewrite(Node& mul) {
    const ir::TensorType& type = mul.output()->type();
    if (type.dtype != ir::DType::Float32) return false;
    Value* x = match(mul.input(0), mul.input(1));
    if (!x) x = match(mul.input(1), mul.input(0));
    if (!x || x->type().sizes != type.sizes || x->type().dtype != type.dtype) return false;
    Node* gelu = graph_.append("aten::gelu", {x}, {type}, {{"approximate", std::string("tanh")}});
    graph_.move_before(gelu, &mul);
    graph_.replace_all_uses(mul.output(), gelu->output());
    if (!mul.output()->name().empty()) gelu->output()->set_name(mul.output()->name());
    dead_.insert(&mul);
    dead_.insert(pattern_.begin(), pattern_.end());
    return true;
  }

  ir::Graph& graph_;
  std::unordered_map<const Value*, int> uses_;
  std::vector<Node*> pattern_;  // the last match's nodes, but the final multiply
  std::unordered_set<const Node*> dead_;
};

}  // namespace

int recognize_gelu(ir::Graph& graph) {
  return GeluRecognizer(graph).run();
}

}  // namespace kiln
