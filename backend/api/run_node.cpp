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

// Runs `node` alone (a one-node plan through ATen) on `inputs`, typed `types` in its graph.
std::vector<at::Tensor> run_node_alone(const ir::Node& node,
                                       const std::vector<ir::TensorType>& types,
                                       const std::vector<at::Tensor>& inputs, c10::Device device) {
  ir::Graph graph;
  std::vector<ir::Value*> values;
  for (const ir::TensorType& type : types)
    values.push_back(graph.add_input(type));
  std::vector<ir::TensorType> output_types;
  for (const ir::Value* out : node.outputs())
    output_types.push_back(out->type());
  for (ir::Value* out : graph.append(node.op(), values, output_types, node.attrs())->outputs())
    graph.add_output(out);
  at::NoGradGuard no_grad;
  return run_plan(build_plan(graph, {}, MemoryPlan{}, device), inputs);
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
  // oneDNN's blocks make it (its type says the least it can be); only kiln::onednn_conv2d reads it,
  // and the same for kiln::onednn_linear's.
  if (result.is_mkldnn() || node.op() == "kiln::onednn_conv2d_weight" ||
      node.op() == "kiln::onednn_linear_weight") {
    return result;
  }
  // The constant must have exactly the type the graph gave the node.
  const ir::TensorType& type = node.output()->type();
  if (result.sizes().vec() != type.sizes || result.strides().vec() != type.strides) {
    result = at::empty_strided(type.sizes, type.strides, result.options()).copy_(result);
  }
  return result;
}

// assign_layout's type inference: the node run once on zeros on the device. Not on meta
// tensors: the meta convolution returns a contiguous output for a channels-last input, where
// oneDNN's returns channels-last, and the types must be what the ops really return.
std::optional<std::vector<ir::TensorType>> infer_types(const ir::Node& node,
                                                       const std::vector<ir::TensorType>& types,
                                                       c10::Device device) {
  try {
    std::vector<at::Tensor> zeros;
    for (const ir::TensorType& t : types) {
      auto options = at::TensorOptions().dtype(to_aten_dtype(t.dtype)).device(device);
      zeros.push_back(at::empty_strided(t.sizes, t.strides, options).zero_());
    }
    std::vector<ir::TensorType> result;
    for (const at::Tensor& t : run_node_alone(node, types, zeros, device)) {
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
