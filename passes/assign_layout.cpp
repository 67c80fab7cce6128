#include "passes/assign_layout.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "kiln/error.h"
#include "passes/fold_constants.h"
#include "passes/ir/op_table.h"

namespace kiln {
namespace {

using ir::Node;
using ir::TensorType;
using ir::Value;

bool is_channels_last(const TensorType& type) {
  return (type.rank() == 4 || type.rank() == 5) &&
         type.strides == channels_last_strides(type.sizes);
}

// Dense NCHW (NCDHW): what a convolution's input is converted from.
bool is_nchw(const TensorType& type) {
  return (type.rank() == 4 || type.rank() == 5) && type.is_contiguous() && !is_channels_last(type);
}

bool is_floating_cpu(const Value* v, int64_t rank) {
  const TensorType& t = v->type();
  return t.rank() == rank && ir::is_floating(t.dtype) && t.device.kind == ir::DeviceKind::CPU;
}

// A 2-D or 3-D convolution (not transposed) over a floating-point CPU tensor.
bool is_conv(const Node& node) {
  const std::string& op = node.op();
  if (op != "aten::convolution" && op != "aten::conv2d" && op != "aten::conv3d" &&
      op != "aten::_convolution") {
    return false;
  }
  const auto* transposed = std::get_if<bool>(node.find_attr("transposed"));
  const int64_t rank = node.input(1)->type().rank();
  return !(transposed && *transposed) && (rank == 4 || rank == 5) &&
         is_floating_cpu(node.input(0), rank);
}

bool is_max_pool2d(const Node& node) {
  return node.op() == "aten::max_pool2d" && is_floating_cpu(node.input(0), 4);
}

// Ops whose values do not depend on their inputs' strides: everything in the op table (pure ATen
// ops) but as_strided, which reads memory by explicit strides.
bool keeps_values_under_any_layout(const Node& node) {
  const ir::OpInfo* info = ir::find_op(node.op());
  return info && info->kind != ir::OpKind::Constant && node.op() != "aten::as_strided";
}

// The dims of `type` from outermost to innermost in memory, when its strides are exactly those
// of a contiguous tensor with its dims in that order (size-1 dims included), or nullopt: such a
// layout is restored from any other by permuting, copying to contiguous and permuting back.
std::optional<std::vector<int64_t>> dense_order(const TensorType& type) {
  std::vector<int64_t> order(type.sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return type.strides[a] > type.strides[b]; });
  int64_t expected = 1;
  for (size_t i = order.size(); i-- > 0;) {
    if (type.strides[order[i]] != expected) return std::nullopt;
    expected *= type.sizes[order[i]];
  }
  return order;
}

// A value may change layout when a copy can give its old one back to whoever needs it.
bool restorable(const TensorType& type) {
  return type.is_contiguous() || dense_order(type).has_value();
}

TensorType permuted(const TensorType& type, const std::vector<int64_t>& dims) {
  TensorType out = type;
  for (size_t i = 0; i < dims.size(); ++i) {
    out.sizes[i] = type.sizes[dims[i]];
    out.strides[i] = type.strides[dims[i]];
  }
  return out;
}

class LayoutAssigner {
 public:
  LayoutAssigner(ir::Graph& graph, const TypeInferrer& infer) : graph_(graph), infer_(infer) {}

  int run() {
    // A convolution whose weight is a graph input would reorder it to channels-last on every
    // call, and a training graph returns its activations for the backward, each then converted
    // back: convolutions go channels-last only where every weight is frozen (converted once).
    // One convolution is enough: oneDNN's (prepack_conv) then packs its weight once, where ATen's
    // reorders it on every call, and reads the image in its own layout.
    bool convolutions = false;
    bool weights_frozen = true;
    for (const Node* node : graph_.nodes()) {
      if (!is_conv(*node)) continue;
      convolutions = true;
      weights_frozen = weights_frozen && from_constants(node->input(1));
    }
    convolutions_channels_last_ = convolutions && weights_frozen;
    bool seeded = false;
    for (const Node* node : graph_.nodes())
      seeded = seeded || is_seed(*node);
    if (!seeded) return 0;
    for (Node* node : graph_.nodes())
      visit(*node);
    std::vector<Value*> outputs = graph_.outputs();
    for (Value*& out : outputs) {
      if (original_.contains(out)) out = restore(out, nullptr);
    }
    graph_.set_outputs(outputs);
    graph_.remove_nodes_if([&](const Node& n) { return replaced_.contains(&n); });
    return remove_unread_conversions();
  }

 private:
  // Where channels-last starts: convolutions (when they run channels-last) and max pooling.
  bool is_seed(const Node& node) const {
    return is_max_pool2d(node) || (convolutions_channels_last_ && is_conv(node));
  }

  void visit(Node& node) {
    if (is_seed(node)) {
      const TensorType& input = node.input(0)->type();
      if (is_nchw(input)) {
        node.replace_input(0, convert(node.input(0), channels_last_format(input.rank()), &node));
      }
      Value* weight = is_conv(node) ? node.input(1) : nullptr;
      if (weight && from_constants(weight) && is_nchw(weight->type())) {
        node.replace_input(1, convert(weight, channels_last_format(weight->type().rank()), &node));
      }
    }
    bool changed = false;
    for (const Value* in : node.inputs())
      changed = changed || original_.contains(in) || source_of_.contains(in);
    if (!changed) return;
    const bool wants_old_layout =
        !keeps_values_under_any_layout(node) || (is_conv(node) && !convolutions_channels_last_);
    if (!wants_old_layout && retype(node)) {
      if (is_seed(node) && is_conv(node)) keep_channels_last(node);
      return;
    }
    // This node reads its inputs in the layout they had.
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      Value* in = node.input(i);
      if (original_.contains(in)) {
        node.replace_input(i, restore(in, &node));
      } else if (auto source = source_of_.find(in); source != source_of_.end()) {
        node.replace_input(i, source->second);
      }
    }
    if (!retype(node)) restore_outputs(node);
  }

  // A channels-last convolution whose output ATen makes NCDHW: for a 3-D one with a 3x3x3 kernel
  // over few values (under 20480 of N * C * D * H, ResNet3D's 128 channels and on at batch 1),
  // ATen picks its native kernel, which is NCDHW only and 3.5x slower than oneDNN's with a
  // prepacked weight. It becomes aten::mkldnn_convolution (the same computation, always on
  // oneDNN, channels-last in and out), which prepack_conv then takes like any other; where ATen
  // has no such op, it stays as it is and its output is converted.
  void keep_channels_last(Node& conv) {
    const TensorType& input = conv.input(0)->type();
    const TensorType& output = conv.output()->type();
    if (!is_channels_last(input) || is_channels_last(output) || output.rank() != 5) return;
    ir::AttrList attrs;
    for (const char* name : {"padding", "stride", "dilation", "groups"}) {
      const ir::Attr* attr = conv.find_attr(name);
      if (!attr) return;
      attrs.emplace_back(name, *attr);
    }
    std::vector<Value*> inputs = {conv.input(0), conv.input(1)};
    if (conv.inputs().size() > 2) {
      inputs.push_back(conv.input(2));
    } else {
      attrs.emplace_back("bias", ir::NoneAttr{});
    }
    Node* onednn =
        graph_.append("aten::mkldnn_convolution", std::move(inputs), {output}, std::move(attrs));
    if (!retype(*onednn) || !is_channels_last(onednn->output()->type())) {
      original_.erase(onednn->output());  // retype's record, for a node that goes
      graph_.remove_nodes_if([&](const Node& n) { return &n == onednn; });
      return;
    }
    onednn->output()->set_name(conv.output()->name());
    graph_.move_before(onednn, &conv);
    graph_.replace_all_uses(conv.output(), onednn->output());
    replaced_.insert(&conv);
  }

  // Gives node's outputs the types ATen gives them for the current inputs; false (and nothing
  // changed) when it cannot run on them, or when an output that changes strides had a layout a
  // copy cannot restore (gaps, overlaps).
  bool retype(Node& node) {
    std::vector<TensorType> inputs;
    for (const Value* in : node.inputs())
      inputs.push_back(in->type());
    auto types = infer_(node, inputs);
    if (!types || types->size() != node.outputs().size()) return false;
    for (size_t i = 0; i < types->size(); ++i) {
      const TensorType& now = node.output(i)->type();
      const TensorType& next = (*types)[i];
      if (next.sizes != now.sizes || next.dtype != now.dtype) return false;
      if (next.strides != now.strides && !restorable(original_type(node.output(i)))) {
        return false;
      }
    }
    for (size_t i = 0; i < types->size(); ++i) {
      Value* out = node.output(i);
      if ((*types)[i].strides == out->type().strides) continue;
      original_.emplace(out, out->type());
      TensorType type = out->type();
      type.strides = (*types)[i].strides;
      out->set_type(std::move(type));
    }
    return true;
  }

  // Only reached when the node cannot run on its inputs' original types either (which it did
  // before this pass): its outputs go back to those types as well.
  void restore_outputs(Node& node) {
    for (Value* out : node.outputs()) {
      if (auto it = original_.find(out); it != original_.end()) {
        out->set_type(it->second);
        original_.erase(it);
      }
    }
  }

  const TensorType& original_type(const Value* v) const {
    auto it = original_.find(v);
    return it == original_.end() ? v->type() : it->second;
  }

  // `value` in `format` (contiguous, or channels-last of its rank), converted once, right before
  // `user` (or at the end, for a graph output).
  Value* convert(Value* value, int64_t format, Node* user) {
    const auto key = std::make_pair(value, format);
    if (auto it = conversions_made_.find(key); it != conversions_made_.end()) return it->second;
    TensorType type = value->type();
    const bool channels_last = format != kContiguousFormat;
    type.strides =
        channels_last ? channels_last_strides(type.sizes) : ir::contiguous_strides(type.sizes);
    Node* copy = graph_.append("aten::_to_copy", {value}, {type},
                               {{"dtype", ir::NoneAttr{}},
                                {"layout", ir::NoneAttr{}},
                                {"device", ir::NoneAttr{}},
                                {"pin_memory", ir::NoneAttr{}},
                                {"non_blocking", false},
                                {"memory_format", format}});
    if (!value->name().empty()) {
      const char* suffix = !channels_last ? "_contiguous" : type.rank() == 5 ? "_ndhwc" : "_nhwc";
      copy->output()->set_name(value->name() + suffix);
    }
    if (user) graph_.move_before(copy, user);
    if (channels_last) source_of_[copy->output()] = value;
    conversions_made_[key] = copy->output();
    made_.insert(copy->output());
    return copy->output();
  }

  // `value` in the layout it had before this pass, right before `user` (or at the end). A
  // permuted dense layout (a transposed token stream, an NHWC permute of an NCHW tensor) is
  // rebuilt as ATen would have made it: permuted to its memory order, copied to contiguous and
  // permuted back.
  Value* restore(Value* value, Node* user) {
    const TensorType old = original_type(value);
    if (old.is_contiguous()) return convert(value, kContiguousFormat, user);
    const auto key = std::make_pair(value, kOriginalLayout);
    if (auto it = conversions_made_.find(key); it != conversions_made_.end()) return it->second;
    const std::vector<int64_t> order = *dense_order(old);
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      inverse[order[i]] = static_cast<int64_t>(i);
    TensorType dense = permuted(value->type(), order);
    dense.strides = ir::contiguous_strides(dense.sizes);
    Value* in_order = permute(value, order, permuted(value->type(), order), user);
    Value* copy = convert(in_order, kContiguousFormat, user);
    Value* back = permute(copy, inverse, permuted(dense, inverse), user);
    if (back->type() != old) {
      throw Error(ErrorKind::Internal, "assign_layout rebuilt " + ir::type_string(back->type()) +
                                           " for " + ir::type_string(old));
    }
    if (!value->name().empty()) back->set_name(value->name() + "_restored");
    conversions_made_[key] = back;
    return back;
  }

  Value* permute(Value* value, const std::vector<int64_t>& dims, TensorType type, Node* user) {
    Node* node = graph_.append("aten::permute", {value}, {std::move(type)}, {{"dims", dims}});
    if (user) graph_.move_before(node, user);
    made_.insert(node->output());
    return node->output();
  }

  // A conversion made for a node that then could not use it is dropped; returns how many of those
  // that stay run on every call.
  int remove_unread_conversions() {
    for (bool removed = true; removed;) {  // a restoring chain goes one node per round
      std::unordered_set<const Value*> read(graph_.outputs().begin(), graph_.outputs().end());
      for (const Node* node : graph_.nodes()) {
        for (const Value* in : node->inputs())
          read.insert(in);
      }
      removed = false;
      graph_.remove_nodes_if([&](const Node& n) {
        const bool unread =
            n.outputs().size() == 1 && made_.contains(n.output()) && !read.contains(n.output());
        removed = removed || unread;
        return unread;
      });
    }
    int kept = 0;
    for (const Node* node : graph_.nodes()) {
      // Frozen weights are converted at compile time; permutations are views.
      kept += node->op() == "aten::_to_copy" && made_.contains(node->output()) &&
              !from_constants(node->input(0));
    }
    return kept;
  }

  ir::Graph& graph_;
  const TypeInferrer& infer_;
  bool convolutions_channels_last_ = false;
  std::unordered_map<const Value*, TensorType> original_;  // values whose strides changed
  std::unordered_map<const Value*, Value*> source_of_;     // channels-last conversion -> its input
  std::map<std::pair<Value*, int64_t>, Value*> conversions_made_;  // (value, format) -> copy
  std::unordered_set<const Value*> made_;                          // outputs of added nodes
  std::unordered_set<const Node*> replaced_;      // convolutions keep_channels_last replaced
  static constexpr int64_t kOriginalLayout = -1;  // conversions_made_'s key for restore()
};

}  // namespace

std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes) {
  // N, [D,] H, W, C from outermost to innermost.
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = sizes.at(1);
  strides[1] = 1;
  for (size_t d = sizes.size(); d-- > 2;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  strides.at(0) = stride;
  return strides;
}

int assign_layout(ir::Graph& graph, const TypeInferrer& infer) {
  return LayoutAssigner(graph, infer).run();
}

}  // namespace kiln
