#include "passes/bf16_activations.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "passes/eliminate_dead_code.h"
#include "passes/fusion_clusters.h"
#include "passes/ir/op_table.h"
#include "passes/kernel/lower_ops.h"
#include "passes/node_rewriter.h"
#include "passes/onednn_conv.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr const char* kLinear = "kiln::onednn_linear";

bool is_max_pool(const Node& node) {
  return node.op() == "aten::max_pool2d" || node.op() == "kiln::onednn_max_pool2d";
}

/// A kiln oneDNN convolution or linear that multiplies in bf16.
bool multiplies_in_bf16(const Node& node) {
  if (!is_onednn_conv(node) && node.op() != kLinear) return false;
  const auto* precision = std::get_if<std::string>(node.find_attr("precision"));
  return precision && *precision == "bf16";
}

/// The residual a convolution adds (`other`), or null.
const Value* other_of(const Node& conv) {
  const std::optional<size_t> at = conv_residual_input(conv);
  return at ? conv.input(*at) : nullptr;
}

/// Whether `y` is `reader`'s input x (its first) and nothing else: not its weight or bias.
bool read_only_as_input(const Node& reader, const Value* y) {
  if (reader.input(0) != y) return false;
  for (size_t i = 1; i < reader.inputs().size(); ++i)
    if (reader.input(i) == y) return false;
  return true;
}

/// A view that keeps its input's dtype (a reshape, a permute, a slice: not `aten::to`): the values
/// it shows are its input's, so it shows them in bf16 where its input is bf16.
bool is_dtype_keeping_view(const Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  return info && info->kind == ir::OpKind::View && node.inputs().size() == 1 &&
         node.outputs().size() == 1 && !node.op().starts_with("aten::to.");
}

/// ATen's fused attention on the CPU, which computes bf16 q, k and v as bf16 products with
/// float32 sums and a float32 softmax, and writes bf16: the inputs 0-2 are q, k and v, a mask the
/// input after them (a float one, read as it is: bf16 q and a float32 mask are allowed), and the
/// flash kernel's second output, its log-sum-exp, stays float32 as ATen writes it.
bool is_bf16_capable_attention(const Node& node) {
  const bool flash = node.op() == "aten::_scaled_dot_product_flash_attention_for_cpu";
  if (!flash && node.op() != "aten::scaled_dot_product_attention") return false;
  const std::optional<double> dropout = number_attr(node, "dropout_p");
  if (node.inputs().size() < 3 || (dropout && *dropout != 0.0)) return false;
  if (node.inputs().size() > 3) {
    const ir::DType mask = node.input(3)->type().dtype;
    if (mask != ir::DType::Float32 && mask != ir::DType::BFloat16) return false;
  }
  return node.outputs().size() == 1 || (flash && node.outputs().size() == 2);
}

class Bf16Activations {
 public:
  explicit Bf16Activations(ir::Graph& graph) : graph_(graph), readers_(readers_of(graph)) {}

  int run() {
    find_bf16_values();
    int changed = 0;
    for (Node* node : graph_.nodes()) {
      if (node->outputs().empty() || !bf16_.contains(node->output())) continue;
      const bool copies_bf16 = is_passed_through(*node) && bf16_.contains(node->input(0));
      if (is_computed(*node) && !copies_bf16) {
        round_in_kernel(node->output());
        ++changed;
        continue;
      }
      ir::TensorType type = node->output()->type();
      type.dtype = ir::DType::BFloat16;
      node->output()->set_type(std::move(type));
      if (multiplies_in_bf16(*node)) node->set_attr("out_precision", std::string("bf16"));
      if (multiplies_in_bf16(*node) || is_bf16_capable_attention(*node)) ++changed;
    }
    return changed + round_kernel_outputs();
  }

 private:
  /// The float32 values that become bf16, as the largest set closed under two rules: each one's
  /// writer can write bf16 (a bf16 convolution or linear; a generated kernel, which rounds as it
  /// stores; a max pool or view of a value in the set; an attention whose q, k and v are all in
  /// the set), and each reader reads it in bf16 anyway (takes_bf16). Starts from every candidate
  /// and drops those that break a rule until none does: an attention's q, k and v, views of one
  /// linear's output, stand or fall together.
  void find_bf16_values() {
    for (const Node* node : graph_.nodes()) {
      if (node->outputs().empty() || node->output()->type().dtype != ir::DType::Float32) continue;
      computed_[node] = kernel_computes(*node);
      if (multiplies_in_bf16(*node) || is_passed_through(*node) ||
          is_bf16_capable_attention(*node) || is_computed(*node)) {
        bf16_.insert(node->output());
      }
    }
    for (bool dropped = true; dropped;) {
      dropped = false;
      std::erase_if(bf16_, [&](const Value* y) {
        const bool drop = !writes_bf16(*y->producer()) || !takes_bf16(y);
        dropped = dropped || drop;
        return drop;
      });
    }
  }

  /// An op a generated kernel computes (a layer norm, a rotary embedding, an SE block's product),
  /// with one output: where every reader takes bf16, the kernel writes bf16 in place of float32
  /// (round_in_kernel), the rounding its readers would have made, at no pass of its own. Asked
  /// once per float32 node, in graph order: `can_lower` may make size decisions, which a shape
  /// class needs in the same number and order at every binding, however many rounds the fixed
  /// point takes.
  bool is_computed(const Node& node) const {
    const auto at = computed_.find(&node);
    return at != computed_.end() && at->second;
  }

  static bool kernel_computes(const Node& node) {
    return node.op() != ir::kFusedOp && node.outputs().size() == 1 &&
           !is_dtype_keeping_view(node) && !is_max_pool(node) && !multiplies_in_bf16(node) &&
           kernel::can_lower(node) && runs_on_one_device(node);
  }

  /// Every reader of the kernel-computed `y` reads a bf16 copy instead: an aten::_to_copy right
  /// after its producer, which the fusers put into that kernel as its output.
  void round_in_kernel(Value* y) {
    Node* cast = append_bf16_copy(graph_, y);
    graph_.move_after(cast, y->producer());  // no extern op between them to keep them apart
    graph_.replace_all_uses(y, cast->output());
    cast->replace_input(0, y);
  }

  /// A max pool (rounding keeps order, so the max of rounded values is the rounded max), a view or
  /// a copy (a transposed attention output made dense for its projection): bf16 where its input
  /// is.
  static bool is_passed_through(const Node& node) {
    return (is_max_pool(node) && node.inputs().size() == 1 && node.outputs().size() == 1) ||
           is_dtype_keeping_view(node) ||
           (node.op() == "aten::clone" && node.inputs().size() == 1 && node.outputs().size() == 1);
  }

  bool writes_bf16(const Node& writer) const {
    if (multiplies_in_bf16(writer) || is_computed(writer)) return true;
    if (is_passed_through(writer)) return bf16_.contains(writer.input(0));
    for (size_t i = 0; i < 3; ++i)  // an attention
      if (!bf16_.contains(writer.input(i))) return false;
    return true;
  }

  /// Whether every reader of `y` reads it in bf16 anyway: a bf16 convolution or linear reading it
  /// as its input (which it would round to bf16; a linear's dense), a bf16 convolution reading
  /// it as its residual, an attention reading it as q, k or v, or a max pool or view whose result
  /// is in the set.
  bool takes_bf16(const Value* y) const {
    const auto at = readers_.find(y);
    if (at == readers_.end() || at->second.empty()) return false;
    for (const Node* reader : at->second) {
      if (!reader) return false;  // a graph output
      if (is_passed_through(*reader)) {
        if (!bf16_.contains(reader->output())) return false;
        continue;
      }
      if (is_bf16_capable_attention(*reader)) {
        for (size_t i = 3; i < reader->inputs().size(); ++i)
          if (reader->input(i) == y) return false;  // its mask
        if (!bf16_.contains(reader->output())) return false;
        continue;
      }
      if (reader->op() == kLinear) {
        // A strided input gets a dense bf16 copy of its own (round_kernel_outputs), one pass
        // where the linear would copy the bf16 value densely after its writer rounded it.
        if (!multiplies_in_bf16(*reader) || !read_only_as_input(*reader, y) ||
            !y->type().is_contiguous()) {
          return false;
        }
        continue;
      }
      // A float32 convolution (a depthwise one) takes float32 operands only, its residual too.
      if (!is_onednn_conv(*reader) || !multiplies_in_bf16(*reader)) return false;
      for (size_t i = 1; i < reader->inputs().size(); ++i) {
        if (reader->input(i) == y && y != other_of(*reader)) return false;  // a weight or bias
      }
    }
    return true;
  }

  /// A bf16 linear whose float32 input a generated kernel computes (a layer norm, an activation)
  /// reads a bf16 copy of it instead, made by an aten::_to_copy that the fusers put into that
  /// kernel: the kernel rounds as it stores, where the linear would have read the float32 tensor
  /// again to round it. Its other readers still read the float32 value. An input that is not
  /// dense row-major (a transposed view: MLP-Mixer's token-mixing linears) is copied to a dense
  /// bf16 tensor the same way, whatever computes it: the linear would have copied it to a dense
  /// float32 tensor and then rounded that, two passes where the copy makes one. Returns the
  /// number of values rounded so.
  int round_kernel_outputs() {
    std::unordered_map<const Value*, Value*> rounded;
    for (Node* linear : graph_.nodes()) {
      if (linear->op() != kLinear || !multiplies_in_bf16(*linear)) continue;
      Value* x = linear->input(0);
      const Node* producer = x->producer();
      // As ATen's contiguous() judges it (the linear's copy): strides of size-1 dims do not count.
      const bool dense = x->type().is_contiguous();
      const bool computed = producer && producer->op() != ir::kFusedOp &&
                            kernel::can_lower(*producer) && runs_on_one_device(*producer);
      if (x->type().dtype != ir::DType::Float32 || !producer || (dense && !computed) ||
          !read_only_as_input(*linear, x)) {
        continue;
      }
      auto [at, added] = rounded.try_emplace(x, nullptr);
      if (added) {
        Node* cast = append_bf16_copy(graph_, x, /*dense=*/true);
        graph_.move_before(cast, linear);  // the first reader in graph order
        at->second = cast->output();
      }
      linear->replace_input(0, at->second);
    }
    return static_cast<int>(rounded.size());
  }

  ir::Graph& graph_;
  std::unordered_map<const Value*, std::vector<Node*>> readers_;
  std::unordered_set<const Value*> bf16_;           // the values find_bf16_values makes bf16
  std::unordered_map<const Node*, bool> computed_;  // kernel_computes of each float32 node
};

}  // namespace

int bf16_activations(ir::Graph& graph) {
  // An unread view left by an earlier rewrite would count as a reader that keeps its input
  // float32.
  eliminate_dead_code(graph);
  return Bf16Activations(graph).run();
}

}  // namespace kiln
