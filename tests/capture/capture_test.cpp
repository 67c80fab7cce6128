// capture_module: the frozen module computes what the original does and never shares a tensor's
// storage with it, whatever holds its tensors.
#include "backend/capture/capture.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/torch.h>

#include <unordered_set>

namespace kiln {
namespace {

using Storages = std::unordered_set<const c10::StorageImpl*>;

void add_storages(const c10::IValue& value, Storages& out) {
  value.visit([&](const c10::IValue& v) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage()) {
      out.insert(v.toTensor().storage().unsafeGetStorageImpl());
    }
    return false;
  });
}

Storages module_storages(const torch::jit::Module& module) {
  Storages out;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    add_storages(attribute.value, out);
  }
  return out;
}

Storages graph_storages(const torch::jit::Graph& graph) {
  Storages out;
  for (const torch::jit::Node* node : graph.nodes()) {
    if (node->kind() == c10::prim::Constant && node->hasAttribute(c10::attr::value)) {
      add_storages(torch::jit::toIValue(node->output()).value(), out);
    }
  }
  return out;
}

// Captures `module`, checks its result on `x` against the original's and that no storage of the
// original is reachable from the capture.
void expect_own_weights(torch::jit::Module module, const at::Tensor& x) {
  CapturedModule captured = capture_module(module);
  torch::NoGradGuard no_grad;
  const at::Tensor expected = module.forward({x}).toTensor();
  EXPECT_TRUE(captured.frozen.forward({x}).toTensor().allclose(expected));
  const Storages originals = module_storages(module);
  Storages captured_storages = graph_storages(*captured.graph);
  for (const auto* s : module_storages(captured.frozen))
    captured_storages.insert(s);
  for (const auto* s : graph_storages(*captured.frozen.get_method("forward").graph())) {
    captured_storages.insert(s);
  }
  EXPECT_FALSE(captured_storages.empty());
  for (const auto* s : captured_storages)
    EXPECT_EQ(originals.count(s), 0u) << "shares a storage";
}

torch::jit::Module define(const std::string& source,
                          const std::vector<std::pair<std::string, at::Tensor>>& parameters) {
  torch::jit::Module module("Weights");
  for (const auto& [name, value] : parameters)
    module.register_parameter(name, value, false);
  module.define(source);
  return module;
}

TEST(Capture, PlainWeightsAreCopiedAndComputeTheSame) {
  auto module = define("def forward(self, x):\n  return torch.mm(x, self.w) + self.b\n",
                       {{"w", torch::randn({8, 4})}, {"b", torch::randn({4})}});
  expect_own_weights(module, torch::randn({3, 8}));
}

TEST(Capture, ViewsOfOneStorageAreCopied) {
  const at::Tensor whole = torch::randn({2, 8});
  auto module = define("def forward(self, x):\n  return x * self.first + self.second\n",
                       {{"first", whole[0]}, {"second", whole[1]}});
  expect_own_weights(module, torch::randn({3, 8}));
}

TEST(Capture, SubmoduleWeightsAreCopied) {
  auto inner = define("def forward(self, x):\n  return x * self.w\n", {{"w", torch::randn({8})}});
  torch::jit::Module outer("Outer");
  outer.register_module("inner", inner);
  outer.register_parameter("bias", torch::randn({8}), false);
  outer.define("def forward(self, x):\n  return self.inner.forward(x) + self.bias\n");
  expect_own_weights(outer, torch::randn({3, 8}));
}

TEST(Capture, QuantizedWeightsAreCopied) {
  torch::jit::Module module("Quantized");
  const at::Tensor q = at::quantize_per_tensor(torch::randn({8}), 0.1, 0, at::kQInt8);
  module.register_attribute("q", c10::TensorType::get(), q);
  module.register_parameter("w", torch::randn({8}), false);
  module.define("def forward(self, x):\n  return x * self.q.dequantize() + self.w\n");
  expect_own_weights(module, torch::randn({3, 8}));
}

TEST(Capture, TensorsOfListsAreCopied) {
  torch::jit::Module module("Listed");
  c10::List<at::Tensor> list({torch::randn({8}), torch::randn({8})});
  module.register_attribute("ws", c10::ListType::ofTensors(), list);
  module.define("def forward(self, x):\n  return x * self.ws[0] + self.ws[1]\n");
  expect_own_weights(module, torch::randn({3, 8}));
}

}  // namespace
}  // namespace kiln
