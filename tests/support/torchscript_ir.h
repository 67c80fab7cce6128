// TorchScript graphs written as IR text, for the tests of passes over them.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/interpreter.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::testing {

inline std::shared_ptr<torch::jit::Graph> parse_torchscript(const std::string& text) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(text, graph.get());
  return graph;
}

/// How many nodes of the graph's top-level block run `op`.
inline int count_ops(const torch::jit::Graph& graph, const char* op) {
  int n = 0;
  for (const torch::jit::Node* node : graph.nodes())
    n += node->kind().toQualString() == std::string(op);
  return n;
}

/// The graph's outputs (tensors) on `inputs`, run by TorchScript's interpreter.
inline std::vector<at::Tensor> run_graph(const std::shared_ptr<torch::jit::Graph>& graph,
                                         const std::vector<at::Tensor>& inputs) {
  torch::jit::Code code(graph, "test");
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  torch::jit::InterpreterState(code).run(stack);
  std::vector<at::Tensor> outputs;
  for (const c10::IValue& v : stack)
    outputs.push_back(v.toTensor());
  return outputs;
}

}  // namespace kiln::testing
