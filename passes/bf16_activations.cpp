#include "passes/bf16_activations.h"

#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "passes/fusion_clusters.h"
#include "passes/kernel/lower_ops.h"
#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr const char* kConv = "kiln::onednn_conv2d";
constexpr const char* kLinear = "kiln::onednn_linear";

bool is_max_pool(const Node& node) {
  return node.op() == "aten::max_pool2d" || node.op() == "kiln::onednn_max_pool2d";
}

/// A kiln oneDNN convolution or linear that multiplies in bf16.
bool multiplies_in_bf16(const Node& node) {
  if (node.op() != kConv && node.op() != kLinear) return false;
  const auto* precision = std::get_if<std::string>(node.find_attr("precision"));
  return precision && *precision == "bf16";
}

/// The residual a convolution adds (`other`), or null. Its inputs are x, weight, packed[, bias]
/// [, other]; an absent one is the attribute None instead.
const Value* other_of(const Node& conv) {
  if (is_none(conv.find_attr("other"))) return nullptr;
  const size_t at = is_none(conv.find_attr("bias")) ? 3 : 4;
  return at < conv.inputs().size() ? conv.input(at) : nullptr;
}

/// Whether `y` is `reader`'s input x (its first) and nothing else: not its weight or bias.
bool read_only_as_input(const Node& reader, const Value* y) {
  if (reader.input(0) != y) return false;
  for (size_t i = 1; i < reader.inputs().size(); ++i)
    if (reader.input(i) == y) return false;
  return true;
}

class Bf16Activations {
 public:
  explicit Bf16Activations(ir::Graph& graph) : graph_(graph), readers_(readers_of(graph)) {}

  int run() {
    int changed = 0;
    for (Node* product : graph_.nodes()) {
      if (!multiplies_in_bf16(*product) || !takes_bf16(product->output())) continue;
      make_bf16(product->output());
      product->set_attr("out_precision", std::string("bf16"));
      ++changed;
    }
    return changed + round_kernel_outputs();
  }

 private:
  /// Whether every reader of the float32 `y` reads it in bf16 anyway: a bf16 convolution or
  /// linear reading it as its input (which it would round to bf16), a oneDNN convolution reading
  /// it as its residual, or a max pool whose result is read so in turn: a max pool of rounded
  /// values is the rounding of its max (rounding keeps order), so in bf16 it computes the same
  /// values.
  bool takes_bf16(const Value* y) {
    const auto& readers = readers_[y];
    if (readers.empty() || y->type().dtype != ir::DType::Float32) return false;
    for (const Node* reader : readers) {
      if (!reader) return false;  // a graph output
      if (is_max_pool(*reader) && reader->inputs().size() == 1 && reader->outputs().size() == 1 &&
          takes_bf16(reader->output())) {
        continue;
      }
      if (reader->op() == kLinear) {
        if (!multiplies_in_bf16(*reader) || !read_only_as_input(*reader, y)) return false;
        continue;
      }
      if (reader->op() != kConv) return false;
      for (size_t i = 1; i < reader->inputs().size(); ++i) {
        if (reader->input(i) == y && y != other_of(*reader)) return false;  // a weight or bias
      }
      if (reader->input(0) == y && !multiplies_in_bf16(*reader)) return false;
    }
    return true;
  }

  /// Types `y`, and the max pools takes_bf16 passed through, bf16.
  void make_bf16(Value* y) {
    ir::TensorType type = y->type();
    type.dtype = ir::DType::BFloat16;
    y->set_type(std::move(type));
    for (const Node* reader : readers_[y]) {
      if (is_max_pool(*reader)) make_bf16(reader->output());
    }
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
};

}  // namespace

int bf16_activations(ir::Graph& graph) {
  return Bf16Activations(graph).run();
}

}  // namespace kiln
