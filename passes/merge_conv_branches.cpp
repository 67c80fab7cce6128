#include "passes/merge_conv_branches.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/fold_constants.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

// The convolution's bias input, or null where it has none (a None attribute).
Value* bias_of(const Node& conv) {
  return conv.inputs().size() > 2 ? conv.input(2) : nullptr;
}

bool has_int_list(const Node& node, const char* name, const std::vector<int64_t>& value) {
  const auto* list = int_list_attr(node, name);
  return list && *list == value;
}

class BranchMerger final : public NodeRewriter {
 public:
  explicit BranchMerger(ir::Graph& graph) : NodeRewriter(graph), uses_(ir::count_uses(graph)) {}

 private:
  bool applies(const Node& node) const override {
    if (node.op() != "aten::add.Tensor" || node.inputs().size() != 2) return false;
    const auto alpha = number_attr(node, "alpha");
    return alpha && *alpha == 1;
  }

  // `sum` and the adds below it that it alone reads form one sum of terms; convolutions of one
  // input among the terms merge, and the sum is written again over what is left.
  bool rewrite(Node& sum) override {
    std::vector<Value*> terms;
    std::vector<Node*> adds;
    collect_terms(sum, terms, adds);
    // The sum is written again, in another order: no type promotion may move. A number added
    // (`0 + conv(x)`: an integral 0-d tensor) promotes to a floating sum's type wherever it goes.
    const ir::DType dtype = sum.output()->type().dtype;
    for (const Value* term : terms) {
      const TensorType& type = term->type();
      const bool number =
          type.rank() == 0 && !ir::is_floating(type.dtype) && ir::is_floating(dtype);
      if (type.dtype != dtype && !number) return false;
    }
    bool merged_any = false;
    for (size_t i = 0; i < terms.size(); ++i) {
      for (size_t j = i + 1; j < terms.size();) {
        Value* merged = merge(terms[i], terms[j], sum.output()->type());
        if (!merged) {
          ++j;
          continue;
        }
        terms[i] = merged;
        terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
        merged_any = true;
      }
    }
    if (!merged_any) return false;
    Value* total = terms[0];
    for (size_t k = 1; k < terms.size(); ++k) {
      total =
          add("aten::add.Tensor", {total, terms[k]}, sum.output()->type(), {{"alpha", int64_t{1}}});
      uses_[total] = 1;
    }
    uses_[total] = uses_[sum.output()];
    replace_with_added(sum, total);
    removed_.insert(adds.begin(), adds.end());
    return true;
  }

  // The terms of the sum `node` computes: its inputs, through the adds of the same type that it
  // alone reads (MobileOne writes its branches' sum as a chain of adds, the identity first), and
  // through additions of 0 (whose sign of zero the merged sum does not keep: -0 + 0 is +0).
  void collect_terms(const Node& node, std::vector<Value*>& terms, std::vector<Node*>& adds) {
    for (Value* v : node.inputs()) {
      Node* inner = v->producer();
      const auto uses = uses_.find(v);
      if (inner && (applies(*inner) || adds_zero(*inner)) && !removed_.contains(inner) &&
          uses != uses_.end() && uses->second == 1 &&
          inner->output()->type() == node.output()->type()) {
        adds.push_back(inner);
        collect_terms(*inner, terms, adds);
      } else {
        terms.push_back(v);
      }
    }
  }

  // `x + 0` (MobileOne's `scale_out + identity_out` without an identity branch): a term the sum
  // goes through.
  static bool adds_zero(const Node& node) {
    const auto other = number_attr(node, "other");
    const auto alpha = number_attr(node, "alpha");
    return node.op() == "aten::add.Scalar" && other && *other == 0 && alpha && *alpha == 1;
  }

  // One convolution for the two terms, when both are convolutions that merge; else null.
  Value* merge(Value* u, Value* v, const TensorType& type) {
    Node* a = branch(u);
    Node* b = branch(v);
    if (!a || !b || a == b || a->input(0) != b->input(0) || !(a->output()->type() == type) ||
        !(b->output()->type() == type)) {
      return nullptr;
    }
    // The larger kernel's grid: the other must fit inside it in every dim.
    if (!fits_inside(*b, *a)) std::swap(a, b);
    const std::optional<std::vector<int64_t>> offsets = centre_offsets(*b, *a);
    if (!offsets) return nullptr;
    std::vector<Value*> inputs = {a->input(0), add_at_centre(a->input(1), b->input(1), *offsets)};
    Value* bias_a = bias_of(*a);
    Value* bias_b = bias_of(*b);
    if (bias_a && bias_b) {
      inputs.push_back(
          add("aten::add.Tensor", {bias_a, bias_b}, bias_a->type(), {{"alpha", int64_t{1}}}));
    } else if (bias_a || bias_b) {
      inputs.push_back(bias_a ? bias_a : bias_b);
    }
    ir::AttrList attrs;
    for (const auto& attr : a->attrs()) {
      if (attr.first != "bias" || inputs.size() == 2) attrs.push_back(attr);
    }
    Value* merged = add(a->op(), std::move(inputs), type, std::move(attrs));
    uses_[merged] = 1;
    removed_.insert(a);
    removed_.insert(b);
    return merged;
  }

  // `large` with `small` added to its window at `offsets` (one per spatial dim): `large` sliced
  // down to the window dim by dim, the sum there, and scattered back. No value is larger than
  // `large`, so fold_constants computes them all; padding `small` to `large`'s size would be a
  // result nine times its input, which it leaves to run time.
  Value* add_at_centre(Value* large, Value* small, const std::vector<int64_t>& offsets) {
    const size_t rank = large->type().sizes.size();
    std::vector<Value*> windows = {large};  // windows[i]: `large` cut in its first i spatial dims
    std::vector<std::pair<int64_t, int64_t>> bounds;  // [start, end) per spatial dim
    for (size_t d = 2; d < rank; ++d) {
      const int64_t start = offsets[d - 2];
      const int64_t end = start + small->type().sizes[d];
      bounds.emplace_back(start, end);
      TensorType cut = windows.back()->type();  // a view: its parent's strides
      cut.sizes[d] = end - start;
      windows.push_back(add("aten::slice.Tensor", {windows.back()}, cut,
                            {{"dim", static_cast<int64_t>(d)},
                             {"start", start},
                             {"end", end},
                             {"step", int64_t{1}}}));
    }
    Value* sum = add("aten::add.Tensor", {windows.back(), small},
                     with_sizes(small->type(), small->type().sizes), {{"alpha", int64_t{1}}});
    for (size_t d = rank; d-- > 2;) {
      const Value* into = windows[d - 2];
      sum = add("aten::slice_scatter", {windows[d - 2], sum},
                with_sizes(into->type(), into->type().sizes),
                {{"dim", static_cast<int64_t>(d)},
                 {"start", bounds[d - 2].first},
                 {"end", bounds[d - 2].second},
                 {"step", int64_t{1}}});
    }
    return sum;
  }

  // The convolution computing `v`, when it can merge: a plain one of a frozen weight (and bias),
  // without dilation, odd kernel sizes and explicit paddings, whose result the add alone reads.
  Node* branch(const Value* v) const {
    Node* conv = v->producer();
    const auto uses = uses_.find(v);
    if (!conv || !is_forward_conv(*conv) || uses == uses_.end() || uses->second != 1 ||
        removed_.contains(conv)) {
      return nullptr;
    }
    if (conv->inputs().size() < 2 || !from_constants(conv->input(1))) return nullptr;
    if (Value* bias = bias_of(*conv); bias && !from_constants(bias)) return nullptr;
    const TensorType& w = conv->input(1)->type();
    const size_t spatial = w.sizes.size() - 2;
    const auto* padding = int_list_attr(*conv, "padding");
    if (w.sizes.size() < 3 || !padding || padding->size() != spatial ||
        !has_int_list(*conv, "dilation", std::vector<int64_t>(spatial, 1)) ||
        !int_list_attr(*conv, "stride") || !number_attr(*conv, "groups")) {
      return nullptr;
    }
    for (size_t d = 2; d < w.sizes.size(); ++d)
      if (w.sizes[d] % 2 == 0) return nullptr;
    return conv;
  }

  // Whether `small`'s kernel fits inside `large`'s in every spatial dim, with the same op,
  // stride, groups and filter count.
  static bool fits_inside(const Node& small, const Node& large) {
    const TensorType& s = small.input(1)->type();
    const TensorType& l = large.input(1)->type();
    if (small.op() != large.op() || s.dtype != l.dtype || s.sizes.size() != l.sizes.size() ||
        s.sizes[0] != l.sizes[0] || s.sizes[1] != l.sizes[1] ||
        *int_list_attr(small, "stride") != *int_list_attr(large, "stride") ||
        number_attr(small, "groups") != number_attr(large, "groups")) {
      return false;
    }
    for (size_t d = 2; d < s.sizes.size(); ++d)
      if (s.sizes[d] > l.sizes[d]) return false;
    return true;
  }

  // Where `small`'s kernel sits in `large`'s (an offset per spatial dim), when it fits inside
  // and their paddings put both kernels' centres on the same input element; else nullopt.
  static std::optional<std::vector<int64_t>> centre_offsets(const Node& small, const Node& large) {
    if (!fits_inside(small, large)) return std::nullopt;
    const std::vector<int64_t>& ks = small.input(1)->type().sizes;
    const std::vector<int64_t>& kl = large.input(1)->type().sizes;
    const std::vector<int64_t>& ps = *int_list_attr(small, "padding");
    const std::vector<int64_t>& pl = *int_list_attr(large, "padding");
    std::vector<int64_t> offsets;
    for (size_t d = 2; d < ks.size(); ++d) {
      const int64_t margin = (kl[d] - ks[d]) / 2;
      if (pl[d - 2] - ps[d - 2] != margin) return std::nullopt;
      offsets.push_back(margin);
    }
    return offsets;
  }

  std::unordered_map<const Value*, int> uses_;
};

}  // namespace

int merge_conv_branches(ir::Graph& graph) {
  return BranchMerger(graph).run();
}

}  // namespace kiln
