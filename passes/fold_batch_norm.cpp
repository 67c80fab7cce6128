#include "passes/fold_batch_norm.h"

#include <unordered_map>
#include <unordered_set>

#include "passes/batch_norm_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

class Folder final : public BatchNormRewriter {
 public:
  explicit Folder(ir::Graph& graph) : BatchNormRewriter(graph), uses_(ir::count_uses(graph)) {}

 private:
  bool rewrite(Node& bn) override {
    Node* op = bn.input(0)->producer();
    if (!op || uses_[bn.input(0)] != 1) return false;
    const bool linear = op->op() == "aten::linear";
    const bool conv = op->op() == "aten::conv2d" || op->op() == "aten::conv3d" ||
                      ((op->op() == "aten::convolution" || op->op() == "aten::_convolution") &&
                       is_false_attr(*op, "transposed"));
    if (!linear && !conv) return false;
    const TensorType& out = bn.output()->type();
    if (out.dtype != ir::DType::Float32 && out.dtype != ir::DType::Float64) return false;
    auto args = batch_norm_arguments(bn);
    if (!args.count("running_mean") || !args.count("running_var")) return false;
    for (const auto& [name, v] : args) {
      if (!is_constant(v)) return false;
    }
    Value* w = op->input(1);
    Value* b = op->inputs().size() > 2 ? op->input(2) : nullptr;
    if (!is_constant(w) || (b && !is_constant(b))) return false;
    const int64_t channels = w->type().sizes.at(0);
    if (out.sizes.size() < 2 || out.sizes[1] != channels) return false;
    const auto* eps = std::get_if<double>(bn.find_attr("eps"));
    if (!eps) return false;

    const TensorType vec = with_sizes(w->type(), {channels});
    Value* s = per_channel_scale(args, *eps, vec);
    std::vector<int64_t> shape(w->type().sizes.size(), 1);
    shape[0] = channels;
    Value* s_w = add("aten::view", {s}, with_sizes(vec, shape), {{"size", shape}});
    Value* new_w = add("aten::mul.Tensor", {w, s_w}, with_sizes(w->type(), w->type().sizes));
    // b2 = (b - mean) * s + beta, with b = 0 and beta = 0 where absent.
    Value* centered =
        b ? add("aten::sub.Tensor", {b, args["running_mean"]}, vec, {{"alpha", int64_t{1}}})
          : add("aten::neg", {args["running_mean"]}, vec);
    Value* new_b = add("aten::mul.Tensor", {centered, s}, vec);
    if (args.count("bias")) {
      new_b = add("aten::add.Tensor", {new_b, args["bias"]}, vec, {{"alpha", int64_t{1}}});
    }
    ir::AttrList attrs;
    for (const auto& attr : op->attrs()) {
      if (attr.first != "bias") attrs.push_back(attr);
    }
    Node* folded = graph_.append(op->op(), {op->input(0), new_w, new_b}, {out}, std::move(attrs));
    folded->output()->set_name(bn.output()->name());
    place_before(&bn, added_, folded);
    graph_.replace_all_uses(bn.output(), folded->output());
    removed_.insert(&bn);
    removed_.insert(op);
    return true;
  }

  // Moves the nodes appended for one fold (and `last`) to just before `anchor`.
  void place_before(Node* anchor, std::vector<Node*>& fresh, Node* last) {
    fresh.push_back(last);
    std::unordered_set<const Node*> moving(fresh.begin(), fresh.end());
    std::vector<Node*> order;
    for (Node* n : graph_.nodes()) {
      if (moving.contains(n)) continue;
      if (n == anchor) order.insert(order.end(), fresh.begin(), fresh.end());
      order.push_back(n);
    }
    graph_.set_node_order(order);
    fresh.clear();
  }

  std::unordered_map<const Value*, int> uses_;
};

}  // namespace

int fold_batch_norm(ir::Graph& graph) {
  Folder folder(graph);
  return folder.run();
}

}  // namespace kiln
