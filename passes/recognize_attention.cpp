#include "passes/recognize_attention.h"

#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "passes/fusion_clusters.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

bool is_float32(const Value* v, size_t rank) {
  return v->type().dtype == ir::DType::Float32 && v->type().sizes.size() == rank;
}

class AttentionRecognizer {
 public:
  explicit AttentionRecognizer(ir::Graph& graph) : graph_(graph), uses_(ir::count_uses(graph)) {}

  int run() {
    int found = 0;
    for (Node* node : graph_.nodes()) {
      if (rewrite(*node)) ++found;
    }
    graph_.remove_nodes_if([&](const Node& n) { return dead_.contains(&n); });
    return found;
  }

 private:
  bool read_once(const Value* v) const {
    const auto uses = uses_.find(v);
    return uses != uses_.end() && uses->second == 1;
  }

  /// The node that makes `v` when it is one of `ops` and only the pattern reads `v`.
  Node* inner(const Value* v, std::initializer_list<const char*> ops) const {
    Node* p = v->producer();
    if (!p || p->outputs().size() != 1 || !read_once(v)) return nullptr;
    for (const char* op : ops)
      if (p->op() == op) return p;
    return nullptr;
  }

  /// The 4-D operand [B, H, R, C] behind a bmm operand [B * H, R, C]: a view of it, or a view of
  /// an expand of it to its own sizes (dynamo's form of a 4-D matmul). Null otherwise.
  Value* unflattened(const Value* flat, std::vector<Node*>& pattern) const {
    Node* view = inner(flat, {"aten::view", "aten::_unsafe_view", "aten::reshape"});
    if (!view) return nullptr;
    Value* x = view->input(0);
    std::vector<Node*> found = {view};
    if (Node* expand = inner(x, {"aten::expand"})) {
      if (expand->input(0)->type().sizes != x->type().sizes) return nullptr;  // a broadcast
      x = expand->input(0);
      found.push_back(expand);
    }
    const auto& s = x->type().sizes;
    if (!is_float32(x, 4) || flat->type().sizes != std::vector<int64_t>{s[0] * s[1], s[2], s[3]})
      return nullptr;
    pattern.insert(pattern.end(), found.begin(), found.end());
    return x;
  }

  /// The operands a and b of the 4-D product `y` = a b (a [B, H, R, K], b [B, H, K, C]), its
  /// nodes added to `pattern`; nulls when `y` is not one. `y` itself may be read elsewhere.
  std::pair<Value*, Value*> product(const Value* y, std::vector<Node*>& pattern,
                                    bool y_read_once) const {
    Node* p = y->producer();
    if (!p || !is_float32(y, 4) || (y_read_once && !read_once(y))) return {nullptr, nullptr};
    std::vector<Node*> found = {p};
    Value* a = nullptr;
    Value* b = nullptr;
    if (p->op() == "aten::matmul" && p->inputs().size() == 2) {
      a = p->input(0);
      b = p->input(1);
    } else if (p->op() == "aten::view" || p->op() == "aten::_unsafe_view") {
      Node* bmm = inner(p->input(0), {"aten::bmm"});
      if (!bmm) return {nullptr, nullptr};
      found.push_back(bmm);
      a = unflattened(bmm->input(0), found);
      b = a ? unflattened(bmm->input(1), found) : nullptr;
    }
    if (!a || !b || !is_float32(a, 4) || !is_float32(b, 4)) return {nullptr, nullptr};
    const auto& as = a->type().sizes;
    const auto& bs = b->type().sizes;
    const auto& ys = y->type().sizes;
    if (as[0] != bs[0] || as[1] != bs[1] || as[3] != bs[2] ||
        ys != std::vector<int64_t>{as[0], as[1], as[2], bs[3]}) {
      return {nullptr, nullptr};
    }
    pattern.insert(pattern.end(), found.begin(), found.end());
    return {a, b};
  }

  /// The softmax over the last dim that makes `p`, read by the pattern alone; or null.
  Node* softmax(const Value* p) const {
    Node* s = inner(p, {"aten::softmax.int", "aten::_softmax"});
    if (!s) return nullptr;
    const auto dim = number_attr(*s, "dim");
    const auto* half = std::get_if<bool>(s->find_attr("half_to_float"));
    const bool plain =
        s->op() == "aten::softmax.int" ? is_none(s->find_attr("dtype")) : half && !*half;
    return plain && dim && (*dim == -1 || *dim == 3) ? s : nullptr;
  }

  /// The scores q kt * scale: a 4-D product, scaled or not. Its nodes go into `pattern`.
  struct Scores {
    Value* q = nullptr;
    Value* kt = nullptr;
    double scale = 1.0;
  };
  std::optional<Scores> scores(const Value* x, std::vector<Node*>& pattern) const {
    std::vector<Node*> found;
    Scores s;
    if (Node* scaled = inner(x, {"aten::mul.Scalar", "aten::div.Scalar"})) {
      const auto by = number_attr(*scaled, "other");
      if (!by || *by == 0.0) return std::nullopt;
      s.scale = scaled->op() == "aten::mul.Scalar" ? *by : 1.0 / *by;
      x = scaled->input(0);
      found.push_back(scaled);
    }
    std::tie(s.q, s.kt) = product(x, found, /*y_read_once=*/true);
    if (!s.q) return std::nullopt;
    pattern.insert(pattern.end(), found.begin(), found.end());
    return s;
  }

  /// Scores filled where a bool mask says (`masked_fill`, or a `where` between the scores and a
  /// value) with a value no score survives beside: -inf, or float32's lowest finite values
  /// (`finfo.min`, as transformers fills). `scores` + an additive mask holding that value where
  /// they are filled and 0 elsewhere gives the same probabilities.
  struct Fill {
    Value* scores = nullptr;
    Value* condition = nullptr;
    bool where_true = true;  // filled where the condition holds (else where it does not)
    double value = 0.0;
  };
  static bool fills_out(std::optional<double> value) {
    constexpr double kLowest = -1e38;  // x + v rounds to v for any |x| below ~1e31
    return value && *value <= kLowest;
  }
  /// The value of a 0-d float32 tensor made from a number (dynamo's `where` operand: -inf as
  /// `aten::scalar_tensor`, transformers' `torch.full([], finfo.min)` as `aten::full`), or
  /// nullopt.
  static std::optional<double> scalar_tensor_value(const Value* v) {
    const Node* p = v->producer();
    if (!p || !v->type().sizes.empty() || v->type().dtype != ir::DType::Float32)
      return std::nullopt;
    if (p->op() == "aten::scalar_tensor") return number_attr(*p, "s");
    if (p->op() == "aten::full") return number_attr(*p, "fill_value");
    return std::nullopt;
  }
  std::optional<Fill> fill(const Value* x, std::vector<Node*>& pattern) const {
    Node* f = inner(x, {"aten::masked_fill.Scalar", "aten::where.self", "aten::where.ScalarSelf",
                        "aten::where.ScalarOther"});
    if (!f) return std::nullopt;
    Fill found;
    if (f->op() == "aten::masked_fill.Scalar" && f->inputs().size() == 2) {
      const auto value = number_attr(*f, "value");
      if (!fills_out(value)) return std::nullopt;
      found = {f->input(0), f->input(1), true, *value};
    } else if (f->op() == "aten::where.self" && f->inputs().size() == 3) {
      const auto self = scalar_tensor_value(f->input(1));
      const auto other = scalar_tensor_value(f->input(2));
      if (fills_out(self)) {
        found = {f->input(2), f->input(0), true, *self};
      } else if (fills_out(other)) {
        found = {f->input(1), f->input(0), false, *other};
      } else {
        return std::nullopt;
      }
    } else if (f->inputs().size() == 2) {
      const bool self = f->op() == "aten::where.ScalarSelf";
      const auto value = number_attr(*f, self ? "self" : "other");
      if (!fills_out(value)) return std::nullopt;
      found = {f->input(1), f->input(0), self, *value};
    } else {
      return std::nullopt;
    }
    if (found.condition->type().dtype != ir::DType::Bool ||
        !broadcasts_to(found.condition->type().sizes, x->type().sizes)) {
      return std::nullopt;
    }
    pattern.push_back(f);
    return found;
  }

  /// The additive float32 mask that does what `f` does: its value where filled, 0 elsewhere.
  Value* additive_mask(const Fill& f, Node& before) {
    Node* mask = graph_.append(
        "aten::where.Scalar", {f.condition},
        {ir::make_contiguous(ir::DType::Float32, f.condition->type().sizes,
                             f.condition->type().device)},
        {{"self", f.where_true ? f.value : 0.0}, {"other", f.where_true ? 0.0 : f.value}});
    graph_.move_before(mask, &before);
    return mask->output();
  }

  bool rewrite(Node& node) {
    if (node.outputs().size() != 1 || dead_.contains(&node)) return false;
    std::vector<Node*> pattern;
    const auto [probabilities, v] = product(node.output(), pattern, /*y_read_once=*/false);
    Node* soft = probabilities ? softmax(probabilities) : nullptr;
    if (!soft) return false;
    pattern.push_back(soft);
    Value* mask = nullptr;
    std::optional<Scores> s;
    std::optional<Fill> filled = fill(soft->input(0), pattern);
    Node* add = filled ? nullptr : inner(soft->input(0), {"aten::add.Tensor"});
    const auto alpha = add ? number_attr(*add, "alpha") : std::nullopt;
    if (filled) {
      s = scores(filled->scores, pattern);
    } else if (add && (!alpha || *alpha == 1.0)) {
      const auto& sizes = soft->input(0)->type().sizes;
      for (int side = 0; side < 2 && !s; ++side) {  // the mask on either side of the add
        mask = add->input(1 - side);
        if (mask->type().dtype == ir::DType::Float32 && broadcasts_to(mask->type().sizes, sizes))
          s = scores(add->input(side), pattern);
      }
      if (s) pattern.push_back(add);
    } else if (!add) {
      s = scores(soft->input(0), pattern);
    }
    if (!s || v->type().sizes[0] != s->q->type().sizes[0] ||
        v->type().sizes[1] != s->q->type().sizes[1]) {
      return false;
    }
    for (const Node* n : pattern)
      if (dead_.contains(n)) return false;
    if (filled) mask = additive_mask(*filled, node);
    replace(node, pattern, s->q, s->kt, v, mask, s->scale);
    return true;
  }

  void replace(Node& node, const std::vector<Node*>& pattern, Value* q, Value* kt, Value* v,
               Value* mask, double scale) {
    ir::TensorType k_type = kt->type();
    std::swap(k_type.sizes[2], k_type.sizes[3]);
    std::swap(k_type.strides[2], k_type.strides[3]);
    Node* k = graph_.append("aten::transpose.int", {kt}, {k_type},
                            {{"dim0", int64_t{2}}, {"dim1", int64_t{3}}});
    if (!kt->name().empty()) k->output()->set_name(kt->name() + "_t");
    std::vector<Value*> inputs = {q, k->output(), v};
    ir::AttrList attrs;
    if (mask) {
      inputs.push_back(mask);
    } else {
      attrs.emplace_back("attn_mask", ir::NoneAttr{});
    }
    attrs.emplace_back("dropout_p", 0.0);
    attrs.emplace_back("is_causal", false);
    attrs.emplace_back("scale", scale);
    attrs.emplace_back("enable_gqa", false);
    Node* attention = graph_.append("aten::scaled_dot_product_attention", std::move(inputs),
                                    {node.output()->type()}, std::move(attrs));
    graph_.move_before(k, &node);
    graph_.move_before(attention, &node);
    graph_.replace_all_uses(node.output(), attention->output());
    if (!node.output()->name().empty()) attention->output()->set_name(node.output()->name());
    dead_.insert(pattern.begin(), pattern.end());
  }

  ir::Graph& graph_;
  std::unordered_map<const Value*, int> uses_;
  std::unordered_set<const Node*> dead_;
};

}  // namespace

int recognize_attention(ir::Graph& graph) {
  return AttentionRecognizer(graph).run();
}

}  // namespace kiln
