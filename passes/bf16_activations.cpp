#include "passes/bf16_activations.h"

#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "passes/node_rewriter.h"

namespace kiln {
namespace {

using ir::Node;
using ir::Value;

constexpr const char* kConv = "kiln::onednn_conv2d";

bool is_max_pool(const Node& node) {
  return node.op() == "aten::max_pool2d" || node.op() == "kiln::onednn_max_pool2d";
}

bool multiplies_in_bf16(const Node& conv) {
  const auto* precision = std::get_if<std::string>(conv.find_attr("precision"));
  return precision && *precision == "bf16";
}

/// The residual a convolution adds (`other`), or null. Its inputs are x, weight, packed[, bias]
/// [, other]; an absent one is the attribute None instead.
const Value* other_of(const Node& conv) {
  if (is_none(conv.find_attr("other"))) return nullptr;
  const size_t at = is_none(conv.find_attr("bias")) ? 3 : 4;
  return at < conv.inputs().size() ? conv.input(at) : nullptr;
}

class Bf16Activations {
 public:
  explicit Bf16Activations(ir::Graph& graph) : graph_(graph), readers_(readers_of(graph)) {}

  int run() {
    int changed = 0;
    for (Node* conv : graph_.nodes()) {
      if (conv->op() != kConv || !multiplies_in_bf16(*conv) || !takes_bf16(conv->output()))
        continue;
      make_bf16(conv->output());
      conv->set_attr("out_precision", std::string("bf16"));
      ++changed;
    }
    return changed;
  }

 private:
  /// Whether every reader of the float32 `y` is a oneDNN convolution reading it as its residual,
  /// or as its input where it multiplies in bf16 (and so rounds it to bf16 anyway), or a max pool
  /// whose result is read so in turn: a max pool of rounded values is the rounding of its max
  /// (rounding keeps order), so in bf16 it computes the same values.
  bool takes_bf16(const Value* y) {
    const auto& readers = readers_[y];
    if (readers.empty() || y->type().dtype != ir::DType::Float32) return false;
    for (const Node* reader : readers) {
      if (!reader) return false;  // a graph output
      if (is_max_pool(*reader) && reader->inputs().size() == 1 && reader->outputs().size() == 1 &&
          takes_bf16(reader->output())) {
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

  ir::Graph& graph_;
  std::unordered_map<const Value*, std::vector<Node*>> readers_;
};

}  // namespace

int bf16_activations(ir::Graph& graph) {
  return Bf16Activations(graph).run();
}

}  // namespace kiln
