// TorchScript graphs written as IR text, for the tests of passes over them.
#pragma once

#include <torch/csrc/jit/ir/irparser.h>

#include <memory>
#include <string>

namespace kiln::testing {

inline std::shared_ptr<torch::jit::Graph> parse_torchscript(const std::string& text) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(text, graph.get());
  return graph;
}

}  // namespace kiln::testing
