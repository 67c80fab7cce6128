#include "passes/canonicalize.h"

#include <cmath>
#include <optional>
#include <unordered_set>
#include <utility>

#include "passes/ir/op_table.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Attr;
using ir::Node;
using ir::Value;

// The node producing `v` when it is an `op` node, else null.
Node* produced_by(const Value* v, const char* op) {
  Node* p = v->producer();
  return p && p->op() == op ? p : nullptr;
}

// w when `t` is w transposed: aten::t(w) or aten::permute(w, [1, 0]) of a 2-D w.
Value* transposed_from(const Value* t) {
  if (Node* p = produced_by(t, "aten::t")) return p->input(0);
  if (Node* p = produced_by(t, "aten::permute")) {
    const auto* dims = int_list_attr(*p, "dims");
    if (dims && *dims == std::vector<int64_t>{1, 0}) return p->input(0);
  }
  return nullptr;
}

bool is_power_of_two(double c) {
  int exponent = 0;
  return c != 0 && std::isfinite(c) && std::frexp(std::fabs(c), &exponent) == 0.5;
}

class Canonicalizer {
 public:
  explicit Canonicalizer(ir::Graph& graph)
      : graph_(graph),
        outputs_(graph.outputs().begin(), graph.outputs().end()),
        inputs_(graph.inputs().begin(), graph.inputs().end()) {}

  int run() {
    for (const Node* node : graph_.nodes()) {
      for (const Value* in : node->inputs())
        read_.insert(in);
    }
    for (Node* node : graph_.nodes())
      visit(*node);
    graph_.remove_nodes_if([&](const Node& n) { return removed_.contains(&n); });
    return rewrites_;
  }

 private:
  void visit(Node& node) {
    const std::string& op = node.op();
    if (op == "aten::addmm" || op == "aten::mm" || op == "aten::matmul") {
      to_linear(node);
    } else if (op == "aten::sub.Tensor") {
      // alpha keeps its kind: an integral tensor takes no floating-point alpha.
      const Attr* alpha = node.find_attr("alpha");
      if (const auto* i = alpha ? std::get_if<int64_t>(alpha) : nullptr; i && *i != 1) {
        replace(node, "aten::add.Tensor", node.inputs(), {{"alpha", -*i}});
      } else if (const auto* d = alpha ? std::get_if<double>(alpha) : nullptr; d && *d != 1) {
        replace(node, "aten::add.Tensor", node.inputs(), {{"alpha", -*d}});
      }
    } else if (op == "aten::div.Scalar") {
      auto c = number_attr(node, "other");
      if (c && is_power_of_two(*c) && ir::is_floating(node.output()->type().dtype)) {
        replace(node, "aten::mul.Scalar", node.inputs(), {{"other", 1.0 / *c}});
      }
    } else if (op == "aten::t") {
      if (Node* inner = produced_by(node.input(0), "aten::t")) forward(node, inner->input(0));
    } else if (op == "aten::transpose.int") {
      Node* inner = produced_by(node.input(0), "aten::transpose.int");
      if (inner && same_pair(node, *inner)) forward(node, inner->input(0));
    } else if (op == "aten::permute") {
      compose_permutes(node);
    } else if (op == "aten::view" || op == "aten::reshape") {
      Node* inner = produced_by(node.input(0), op.c_str());
      if (inner && inner->input(0)->type().is_contiguous()) {
        replace(node, op, {inner->input(0)}, node.attrs());
      } else {
        unflatten_linear(node);
      }
    } else if (op == "aten::max_pool2d_with_indices" || op == "aten::max_pool3d_with_indices") {
      // The indices only matter to a backward; without readers this is ATen's (much faster)
      // max_pool2d (max_pool3d), whose arguments have the same names.
      const bool three_d = op == "aten::max_pool3d_with_indices";
      if (!is_read(node.output(1))) {
        replace_first_output(node, three_d ? "aten::max_pool3d" : "aten::max_pool2d", node.attrs());
      }
    } else if (op == "aten::_native_batch_norm_legit_no_training") {
      // AOTAutograd's eval-mode batch norm; its saved mean/invstd outputs are for a backward.
      if (!is_read(node.output(1)) && !is_read(node.output(2))) {
        ir::AttrList attrs = node.attrs();
        attrs.push_back({"training", false});
        attrs.push_back({"cudnn_enabled", false});
        replace_first_output(node, "aten::batch_norm", std::move(attrs));
      }
    } else if (op == "aten::adaptive_avg_pool2d" || op == "aten::adaptive_avg_pool3d") {
      // To one value per channel (a classifier's pooling, a squeeze-excitation gate): a mean,
      // which the fusers take; ATen's pooling runs as a step of its own. AOTAutograd's
      // decomposition does the same for torch.compile's graphs.
      const auto& sizes = node.output()->type().sizes;
      const int64_t pooled = op == "aten::adaptive_avg_pool3d" ? 3 : 2;
      const int64_t rank = static_cast<int64_t>(sizes.size());
      std::vector<int64_t> dims;
      for (int64_t d = 1; d <= pooled && rank > pooled && sizes[rank - d] == 1; ++d)
        dims.push_back(-d);
      if (static_cast<int64_t>(dims.size()) == pooled) {
        replace(node, "aten::mean.dim", node.inputs(),
                {{"dim", dims}, {"keepdim", true}, {"dtype", ir::NoneAttr{}}});
      }
    } else if (op == "aten::clone") {
      drop_clone(node);
    } else if (op == "aten::logical_not") {
      negate_comparison(node);
    } else if (op == "aten::any.dim") {
      any_above_minus_infinity(node);
    } else if (op == "aten::to.dtype" || op == "aten::type_as" || op == "aten::contiguous") {
      const auto& in = node.input(0)->type();
      const auto& out = node.output()->type();
      const Attr* copy = node.find_attr("copy");
      const bool copies = copy && std::get_if<bool>(copy) && std::get<bool>(*copy);
      if (!copies && in.dtype == out.dtype && in.strides == out.strides) {
        forward(node, node.input(0));
      } else if (op == "aten::contiguous" && in.strides != out.strides) {
        // One that copies (a permuted or channels-last input) is a clone into that layout,
        // which the fusers take.
        ir::AttrList attrs;
        if (const Attr* format = node.find_attr("memory_format"))
          attrs.push_back({"memory_format", *format});
        replace(node, "aten::clone", node.inputs(), std::move(attrs));
      }
    }
  }

  // not(x == c) is x != c and not(x != c) is x == c, NaN included (a NaN equals nothing): an
  // elementwise op the fusers take, where logical_not runs through ATen.
  void negate_comparison(Node& node) {
    for (const auto& [from, to] : {std::pair{"aten::eq.Scalar", "aten::ne.Scalar"},
                                   std::pair{"aten::ne.Scalar", "aten::eq.Scalar"}}) {
      if (Node* comparison = produced_by(node.input(0), from)) {
        replace(node, to, comparison->inputs(), comparison->attrs());
        return;
      }
    }
  }

  // Attention with a float mask, as PyTorch decomposes it, zeroes the rows its mask takes out
  // entirely: any(s != -inf, dim) asks whether a row holds a value above -inf, which is whether
  // its maximum is (a row with a NaN: true either way). amax is a reduction the fusers take,
  // beside the softmax of the same rows; any.dim runs through ATen.
  void any_above_minus_infinity(Node& node) {
    Node* comparison = produced_by(node.input(0), "aten::ne.Scalar");
    const std::optional<double> c = comparison ? number_attr(*comparison, "other") : std::nullopt;
    const auto* dim = std::get_if<int64_t>(node.find_attr("dim"));
    const auto* keepdim = std::get_if<bool>(node.find_attr("keepdim"));
    if (!c || !std::isinf(*c) || *c > 0 || !dim || !keepdim) return;
    Value* scores = comparison->input(0);
    const ir::TensorType& type = scores->type();
    const int64_t rank = type.rank();
    const int64_t d = *dim < 0 ? *dim + rank : *dim;
    if (!ir::is_floating(type.dtype) || d < 0 || d >= rank || type.sizes[d] == 0) return;
    std::vector<int64_t> sizes = type.sizes;
    if (*keepdim) {
      sizes[d] = 1;
    } else {
      sizes.erase(sizes.begin() + d);
    }
    Node* amax = graph_.append("aten::amax", {scores}, {with_sizes(type, sizes)},
                               {{"dim", std::vector<int64_t>{d}}, {"keepdim", *keepdim}});
    graph_.move_before(amax, &node);
    replace(node, "aten::ne.Scalar", {amax->output()}, comparison->attrs());
  }

  // A clone that keeps its input's layout copies bytes no one needs apart: values are never
  // written in place in the IR (eval-mode dropout becomes such a clone). Its readers read the
  // input instead. A clone that is a graph output stays unless its input is a fresh result of a
  // computing op that nothing else returns, so the caller never gets an alias of an input, a
  // constant, a view or another output.
  void drop_clone(Node& node) {
    Value* in = node.input(0);
    if (!(in->type() == node.output()->type())) return;  // a layout change (memory_format)
    if (outputs_.contains(node.output())) {
      const Node* producer = in->producer();
      const ir::OpInfo* info = producer ? ir::find_op(producer->op()) : nullptr;
      if (!info) return;
      switch (info->kind) {
        case ir::OpKind::Elementwise:
        case ir::OpKind::Reduction:
        case ir::OpKind::Normalization:
        case ir::OpKind::Gemm:
        case ir::OpKind::Convolution:
        case ir::OpKind::Pooling:
          break;
        default:
          return;
      }
    }
    forward(node, in);
  }

  bool same_pair(const Node& a, const Node& b) {
    auto d0 = number_attr(a, "dim0"), d1 = number_attr(a, "dim1");
    auto e0 = number_attr(b, "dim0"), e1 = number_attr(b, "dim1");
    const auto rank = static_cast<double>(a.output()->type().sizes.size());
    auto norm = [&](double d) { return d < 0 ? d + rank : d; };
    if (!d0 || !d1 || !e0 || !e1) return false;
    const double a0 = norm(*d0), a1 = norm(*d1), b0 = norm(*e0), b1 = norm(*e1);
    return (a0 == b0 && a1 == b1) || (a0 == b1 && a1 == b0);
  }

  void compose_permutes(Node& node) {
    Node* inner = produced_by(node.input(0), "aten::permute");
    const auto* outer_dims = int_list_attr(node, "dims");
    const auto* inner_dims = inner ? int_list_attr(*inner, "dims") : nullptr;
    if (!outer_dims || !inner_dims || outer_dims->size() != inner_dims->size()) return;
    const auto rank = static_cast<int64_t>(outer_dims->size());
    std::vector<int64_t> dims(rank);
    bool identity = true;
    for (int64_t i = 0; i < rank; ++i) {
      int64_t o = (*outer_dims)[i] < 0 ? (*outer_dims)[i] + rank : (*outer_dims)[i];
      int64_t d = (*inner_dims)[o];
      dims[i] = d < 0 ? d + rank : d;
      identity = identity && dims[i] == i;
    }
    if (identity) {
      forward(node, inner->input(0));
    } else {
      replace(node, "aten::permute", {inner->input(0)}, {{"dims", dims}});
    }
  }

  // addmm(b, x, t(w)) with beta = alpha = 1 and a 1-D b, or mm/matmul(x, t(w)) ->
  // linear(x, w[, b]). linear without a bias is matmul(x, t(w)) in ATen, so the results are the
  // same bits; a bias added after the product stays an add, which fuse_epilogue then runs as the
  // GEMM's epilogue (adding it inside the GEMM would round differently).
  void to_linear(Node& node) {
    const bool addmm = node.op() == "aten::addmm";
    Value* t = node.input(addmm ? 2 : 1);
    Value* w = transposed_from(t);
    if (!w) w = transposed_constant(node, t);
    if (!w) return;
    if (addmm) {
      if (number_attr(node, "beta") != 1.0 || number_attr(node, "alpha") != 1.0) return;
      if (node.input(0)->type().sizes.size() != 1) return;
      replace(node, "aten::linear", {node.input(1), w, node.input(0)}, {});
    } else {
      replace(node, "aten::linear", {node.input(0), w}, {{"bias", ir::NoneAttr{}}});
    }
  }

  // view(linear(view(x, [-1, K]), w, b), [..., N]) -> linear(x, w, b) for a contiguous x of
  // sizes [..., K] (a traced GPT-2 Conv1D, or any linear written on flattened rows): ATen's
  // linear over a contiguous N-D input is that same addmm on the flattened rows, so the bits are
  // the same, and the activation or bias add after it now meets the linear without a view in
  // between (prepack_linear makes it the linear's post-op).
  void unflatten_linear(Node& view) {
    Node* linear = produced_by(view.input(0), "aten::linear");
    if (!linear || is_read_elsewhere(linear->output(), view)) return;
    const Node* flatten = linear->input(0)->producer();
    if (!flatten || (flatten->op() != "aten::view" && flatten->op() != "aten::reshape")) return;
    Value* x = flatten->input(0);
    const ir::TensorType& rows = linear->input(0)->type();
    const ir::TensorType& out = view.output()->type();
    if (rows.rank() != 2 || x->type().rank() < 2 || !x->type().is_contiguous() ||
        !out.is_contiguous() || x->type().sizes.back() != rows.sizes[1]) {
      return;
    }
    std::vector<int64_t> sizes = x->type().sizes;
    sizes.back() = linear->output()->type().sizes[1];
    if (sizes != out.sizes) return;
    std::vector<Value*> inputs = linear->inputs();
    inputs[0] = x;
    replace(view, "aten::linear", std::move(inputs), linear->attrs());
    removed_.insert(linear);
    // Gone now too where the linear alone read it: passes before dead-code elimination
    // (bf16_activations) would count it as a reader.
    if (!is_read_elsewhere(flatten->output(), *linear)) removed_.insert(flatten);
  }

  // Whether a node other than `reader` reads `v`, or the graph returns it.
  bool is_read_elsewhere(const Value* v, const Node& reader) const {
    if (outputs_.contains(v)) return true;
    for (const Node* node : graph_.nodes()) {
      if (node == &reader || removed_.contains(node)) continue;
      for (const Value* in : node->inputs())
        if (in == v) return true;
    }
    return false;
  }

  // A 2-D constant right operand `t` of x @ t is a frozen weight stored [K, N]: either a
  // transposed view of a contiguous [N, K] weight (TorchScript freezing folds `w.t()` into one)
  // or a plain [K, N] weight (GPT-2's Conv1D multiplies by its [in, out] weight). Its transpose, a
  // new aten::t before `user` that fold_constants makes a constant, is linear's [N, K] weight, so
  // prepack_linear can pack it like any other; nullptr when `t` is not a 2-D constant.
  Value* transposed_constant(Node& user, Value* t) {
    const ir::TensorType& type = t->type();
    if (!produced_by(t, ir::kConstantOp) || type.rank() != 2) return nullptr;
    ir::TensorType weight = type;
    weight.sizes = {type.sizes[1], type.sizes[0]};
    weight.strides = {type.strides[1], type.strides[0]};
    Node* transpose = graph_.append("aten::t", {t}, {weight}, {});
    transpose->output()->set_name(t->name() + "_t");
    graph_.move_before(transpose, &user);
    return transpose->output();
  }

  bool is_read(const Value* v) const { return read_.contains(v) || outputs_.contains(v); }

  // A single-output `op` on the same inputs takes over node's first output (the others are
  // unread).
  void replace_first_output(Node& node, const std::string& op, ir::AttrList attrs) {
    Node* fresh = graph_.append(op, node.inputs(), {node.output(0)->type()}, std::move(attrs));
    fresh->output()->set_name(node.output(0)->name());
    graph_.move_before(fresh, &node);
    if (outputs_.contains(node.output(0))) outputs_.insert(fresh->output());
    graph_.replace_all_uses(node.output(0), fresh->output());
    removed_.insert(&node);
    ++rewrites_;
  }

  // Uses of node's output read `value` instead; skipped where a graph output would alias.
  void forward(Node& node, Value* value) {
    if (outputs_.contains(node.output()) && (inputs_.contains(value) || outputs_.contains(value))) {
      return;
    }
    if (outputs_.contains(node.output())) outputs_.insert(value);
    graph_.replace_all_uses(node.output(), value);
    removed_.insert(&node);
    ++rewrites_;
  }

  // A new node in node's place, computing the same output.
  Node& replace(Node& node, const std::string& op, std::vector<Value*> inputs, ir::AttrList attrs) {
    Node* fresh = graph_.append(op, std::move(inputs), {node.output()->type()}, std::move(attrs));
    fresh->output()->set_name(node.output()->name());
    graph_.move_before(fresh, &node);
    if (outputs_.contains(node.output())) outputs_.insert(fresh->output());
    graph_.replace_all_uses(node.output(), fresh->output());
    removed_.insert(&node);
    ++rewrites_;
    return *fresh;
  }

  // Appended nodes go where they are needed: right before `anchor`.

  ir::Graph& graph_;
  std::unordered_set<const Value*> outputs_;
  std::unordered_set<const Value*> inputs_;
  std::unordered_set<const Value*> read_;  // values some node takes as an input
  std::unordered_set<const Node*> removed_;
  int rewrites_ = 0;
};

}  // namespace

int canonicalize(ir::Graph& graph) {
  return Canonicalizer(graph).run();
}

}  // namespace kiln
