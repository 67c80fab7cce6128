#include "backend/api/run_node.h"

#include <ATen/ATen.h>

#include <string>

#include "passes/base/environment.h"
#include "passes/plan_memory.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/executor.h"
#include "runtime/plan_builder.h"

namespace kiln {
namespace {

std::vector<ir::TensorType> output_types_of(const ir::Node& node) {
  std::vector<ir::TensorType> types;
  for (const ir::Value* out : node.outputs())
    types.push_back(out->type());
  return types;
}

// Runs `node` alone (a one-node plan through ATen) on `inputs`, typed `types` in its graph (its
// outputs `output_types`, by default the node's).
std::vector<at::Tensor> run_node_alone(const ir::Node& node,
                                       const std::vector<ir::TensorType>& types,
                                       const std::vector<at::Tensor>& inputs, c10::Device device,
                                       std::vector<ir::TensorType> output_types = {}) {
  ir::Graph graph;
  std::vector<ir::Value*> values;
  for (const ir::TensorType& type : types)
    values.push_back(graph.add_input(type));
  if (output_types.empty()) output_types = output_types_of(node);
  for (ir::Value* out : graph.append(node.op(), values, output_types, node.attrs())->outputs())
    graph.add_output(out);
  at::NoGradGuard no_grad;
  Plan plan = build_plan(graph, {}, MemoryPlan{}, device);
  // What ATen returns is the question (type inference asks for its layouts), not a tensor
  // conformed to the types the node had before.
  for (Step& step : plan.steps)
    if (auto* call = std::get_if<ExternStep>(&step)) call->fresh_layouts.clear();
  return run_plan(plan, inputs);
}

}  // namespace

// fold_constants' evaluator: the node on constant tensors.
at::Tensor evaluate_node(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                         c10::Device device) {
  std::vector<ir::TensorType> types;
  for (const ir::Value* in : node.inputs())
    types.push_back(in->type());
  at::Tensor result = run_node_alone(node, types, inputs, device).at(0);
  // A weight in oneDNN's opaque layout (prepack_linear) has no strides; its type keeps the
  // dense sizes and only oneDNN's ops read it. A weight onednn_conv packed is as long as
  // oneDNN's blocks make it (its type says the least it can be); only kiln::onednn_conv2d (3d)
  // reads it, and the same for kiln::onednn_linear's.
  if (result.is_mkldnn() || node.op() == "kiln::onednn_conv2d_weight" ||
      node.op() == "kiln::onednn_conv3d_weight" || node.op() == "kiln::onednn_linear_weight") {
    return result;
  }
  // The constant must have exactly the type the graph gave the node.
  const ir::TensorType& type = node.output()->type();
  if (result.sizes().vec() != type.sizes || result.strides().vec() != type.strides) {
    result = at::empty_strided(type.sizes, type.strides, result.options()).copy_(result);
  }
  return result;
}

namespace {

std::vector<at::Tensor> zeros_of(const std::vector<ir::TensorType>& types, c10::Device device) {
  std::vector<at::Tensor> zeros;
  for (const ir::TensorType& t : types) {
    auto options = at::TensorOptions().dtype(to_aten_dtype(t.dtype)).device(device);
    zeros.push_back(at::empty_strided(t.sizes, t.strides, options).zero_());
  }
  return zeros;
}

// The batches the type inference runs a node on in place of a large one: two, so that a stride
// that follows the batch shows.
constexpr int64_t kSmallBatches[] = {2, 3};
// Below it, the node runs at its own batch (the two small runs would cost as much).
constexpr int64_t kMinBatchToShrink = 8;

// Whether dim 0 of `t` is its outermost: every other stride below its own, so that no other
// stride depends on how many entries it has.
bool batch_outermost(const ir::TensorType& t) {
  for (size_t d = 1; d < t.sizes.size(); ++d)
    if (t.strides[d] >= t.strides[0]) return false;
  return true;
}

}  // namespace

// The output types `node` returns at the batch of its first input, from runs at small batches:
// where every input and output leading with that batch holds it as its outermost dim, the
// outputs at the small batches are what the graph says but for that dim, and their strides are
// the same at both; nullopt otherwise (the node then runs at its own batch). A convolution of a
// batch of 32 costs 16 times one of 2.
std::optional<std::vector<ir::TensorType>> types_from_small_batches(
    const ir::Node& node, const std::vector<ir::TensorType>& types, c10::Device device) {
  if (types.empty() || types[0].rank() < 2) return std::nullopt;
  const int64_t batch = types[0].sizes[0];
  const std::vector<ir::TensorType> outputs = output_types_of(node);
  if (batch < kMinBatchToShrink || outputs.empty()) return std::nullopt;
  for (const ir::TensorType& t : outputs)
    if (t.rank() < 1 || t.sizes[0] != batch) return std::nullopt;
  std::vector<std::vector<at::Tensor>> runs;
  for (int64_t small : kSmallBatches) {
    std::vector<ir::TensorType> in = types, out = outputs;
    for (ir::TensorType& t : in) {
      if (t.rank() == 0 || t.sizes[0] != batch) continue;
      if (!batch_outermost(t)) return std::nullopt;
      t.sizes[0] = small;
    }
    for (ir::TensorType& t : out)
      t.sizes[0] = small;
    // An attribute that holds the batch (a view's shape) makes the small run fail; a weight
    // that leads with as many rows (shrunk with the batch) gives outputs of other sizes.
    try {
      runs.push_back(run_node_alone(node, in, zeros_of(in, device), device, out));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (runs.back().size() != out.size()) return std::nullopt;
    for (size_t i = 0; i < out.size(); ++i)
      if (runs.back()[i].sizes().vec() != out[i].sizes) return std::nullopt;
  }
  std::vector<ir::TensorType> result;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor &a = runs[0][i], &b = runs[1][i];
    if (a.strides() != b.strides() || a.scalar_type() != b.scalar_type()) return std::nullopt;
    ir::TensorType type = outputs[i];
    type.strides = a.strides().vec();
    if (!batch_outermost(type)) return std::nullopt;
    type.dtype = to_ir_dtype(a.scalar_type()).value_or(type.dtype);
    result.push_back(std::move(type));
  }
  return result;
}

// assign_layout's type inference: the node run on zeros on the device (at small batches where
// that shows what it returns at its own). Not on meta tensors: the meta convolution returns a
// contiguous output for a channels-last input, where oneDNN's returns channels-last, and the
// types must be what the ops really return.
std::optional<std::vector<ir::TensorType>> infer_types(const ir::Node& node,
                                                       const std::vector<ir::TensorType>& types,
                                                       c10::Device device) {
  if (auto small = types_from_small_batches(node, types, device)) return small;
  try {
    std::vector<ir::TensorType> result;
    for (const at::Tensor& t : run_node_alone(node, types, zeros_of(types, device), device)) {
      ir::TensorType type = node.output(result.size())->type();
      type.sizes = t.sizes().vec();
      type.strides = t.strides().vec();
      type.dtype = to_ir_dtype(t.scalar_type()).value_or(type.dtype);
      result.push_back(std::move(type));
    }
    return result;
  } catch (const std::exception& e) {
    log(LogLevel::Debug, "layout: cannot run " + node.op() + " on new strides: " + e.what());
  }
  return std::nullopt;
}

}  // namespace kiln
