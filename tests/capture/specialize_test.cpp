// What a specialization folds from its input signature (backend/capture/specialize_graph.h): checks
// of the input's metadata, grad mode, autocast and the module's attributes fold away, and
// nothing that can change during the call is folded.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "kiln/kiln.h"
#include "support/test_models.h"

namespace kiln {
namespace {

using testing::compare;

/// A module whose forward is `source`, with `attributes` (name, value) registered first.
torch::jit::Module define(const std::string& source,
                          const std::vector<std::pair<std::string, c10::IValue>>& attributes = {}) {
  torch::jit::Module module("Checks");
  for (const auto& [name, value] : attributes)
    module.register_attribute(name, value.type(), value);
  module.define(source);
  return module;
}

// A module with state: its compiled form and itself, called three times in step, must agree
// each time (each keeps its own copy of the state, starting from the same values).
void expect_the_same_over_calls(torch::jit::Module& module) {
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({4, 8});
  for (int call = 1; call <= 3; ++call) {
    const c10::IValue expected = module.forward({x});
    EXPECT_EQ(compare(compiled.forward({x}), expected), "") << "call " << call;
  }
}

// For a module that changes its input in place: each call, compiled or not, gets its own copy.
void expect_the_same_on_copies(CompiledModule& compiled, torch::jit::Module& module,
                               const at::Tensor& x, int calls) {
  torch::NoGradGuard no_grad;
  const c10::IValue expected = module.forward({x.clone()});
  for (int call = 1; call <= calls; ++call)
    EXPECT_EQ(compare(compiled.forward({x.clone()}), expected), "") << "call " << call;
}

TEST(Specialize, ChecksOfTheInputFoldAwayAndEachSignatureTakesItsBranch) {
  auto module = define(R"(
    def forward(self, x):
        # 6: float32 (module.define has no torch.float32)
        if x.dim() == 3 and x.dtype == 6 and not x.requires_grad and not x.is_cuda and x.size(-1) == 4:
            return torch.relu(x) * 2.0
        return x - 1.0
  )");
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  for (const at::Tensor& x : {torch::randn({2, 3, 4}), torch::randn({3, 4}),
                              torch::randn({2, 3, 5}), torch::randn({2, 3, 4}, torch::kDouble)}) {
    EXPECT_EQ(compare(compiled.forward({x}), module.forward({x})), "") << x.sizes();
    // The checks ran at compile time: one compiled region, no interpreter.
    const Explanation explanation = compiled.explain({x});
    EXPECT_EQ(explanation.interpreter, 0) << explanation.to_text();
  }
  EXPECT_EQ(compiled.num_specializations(), 4);
}

TEST(Specialize, GradModeAndAutocastAreFoldedPerSignature) {
  auto module = define(R"(
    def forward(self, x):
        y = x * 3.0
        if torch.is_grad_enabled():
            y = y + 1.0
        if torch.is_autocast_enabled():
            y = y - 5.0
        return y
  )");
  auto compiled = compile(module);
  const at::Tensor x = torch::randn({4, 8});
  for (bool grad : {false, true}) {
    for (bool autocast : {false, true}) {
      // Written out rather than run by LibTorch: its graph executor's autocast pass crashes on
      // this graph with CUDA autocast on and no CUDA (torch 2.11).
      const at::Tensor expected = x * 3.0 + (grad ? 1.0 : 0.0) - (autocast ? 5.0 : 0.0);
      at::GradMode::set_enabled(grad);
      at::autocast::set_autocast_enabled(at::kCUDA, autocast);
      const c10::IValue actual = compiled.forward({x});
      const int interpreter_nodes = compiled.explain({x}).interpreter;
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::GradMode::set_enabled(true);
      EXPECT_EQ(compare(actual, expected), "") << "grad " << grad << ", autocast " << autocast;
      EXPECT_EQ(interpreter_nodes, 0) << "grad " << grad << ", autocast " << autocast;
    }
  }
  EXPECT_EQ(compiled.num_specializations(), 4);
}

// x.dim() after x.unsqueeze_(0) is not the dim of the input the signature saw.
TEST(Specialize, AnInputChangedInPlaceKeepsItsChecks) {
  auto module = define(R"(
    def forward(self, x):
        x.unsqueeze_(0)
        return x * float(x.dim()) + float(x.size(0))
  )");
  auto compiled = compile(module);
  expect_the_same_on_copies(compiled, module, torch::randn({3, 4}), 2);
}

TEST(Specialize, TheModulesAttributesFold) {
  auto module = define(R"(
    def forward(self, x):
        if self.use_scale:
            return x * self.scale
        return x
  )",
                       {{"use_scale", true}, {"scale", 2.5}});
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({4, 8});
  EXPECT_EQ(compare(compiled.forward({x}), module.forward({x})), "");
  EXPECT_EQ(compiled.explain({x}).interpreter, 0) << compiled.explain({x}).to_text();
}

// An attribute the forward sets changes from call to call: nothing is folded from it.
TEST(Specialize, AttributesTheModuleSetsAreNotFolded) {
  auto module = define(R"(
    def forward(self, x):
        self.calls += 1
        return x * float(self.calls)
  )",
                       {{"calls", int64_t{0}}});
  expect_the_same_over_calls(module);
}

// A list the forward appends to changes from call to call too.
TEST(Specialize, AttributesTheModuleChangesInPlaceAreNotFolded) {
  auto module = define(R"(
    def forward(self, x):
        self.seen.append(1)
        return x * float(len(self.seen))
  )",
                       {{"seen", c10::List<int64_t>()}});
  expect_the_same_over_calls(module);
}

// A traced model asks intermediates for their sizes (ShuffleNetV2's channel shuffle); the
// signature fixes them, so the view's sizes become constants and the graph is one region.
TEST(Specialize, SizesOfComputedValuesFold) {
  auto module = define(R"(
    def forward(self, x):
        y = torch.relu(x).flatten(1)
        n = y.size(0)
        groups = y.size(1) // 4
        return y.view(n, groups, 4).transpose(1, 2).reshape(n, -1) * float(y.dim())
  )");
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  for (const at::Tensor& x : {torch::randn({2, 4, 3}), torch::randn({5, 8, 2})}) {
    EXPECT_EQ(compare(compiled.forward({x}), module.forward({x})), "") << x.sizes();
    const Explanation explanation = compiled.explain({x});
    EXPECT_EQ(explanation.interpreter, 0) << explanation.to_text();
  }
}

// A meta tensor never requires grad and lives on no real device: what a computed value says of
// its grad-ness and device is left to run time.
TEST(Specialize, ComputedValuesKeepTheirRequiresGradAndDeviceChecks) {
  auto module = define(R"(
    def forward(self, x):
        y = x * 2.0
        if y.requires_grad and not y.is_cuda:
            return y + 1.0
        return y - 1.0
  )");
  auto compiled = compile(module);
  const at::Tensor x = torch::randn({3, 4}).requires_grad_();
  EXPECT_EQ(compare(compiled.forward({x}), module.forward({x})), "");
}

// An in-place op could change a computed value's sizes: nothing computed is folded.
TEST(Specialize, AGraphThatChangesATensorInPlaceKeepsComputedSizes) {
  auto module = define(R"(
    def forward(self, x):
        y = x.relu()
        x.unsqueeze_(0)
        return y * float(y.size(0)) + float(x.dim())
  )");
  auto compiled = compile(module);
  const at::Tensor x = torch::randn({3, 4});
  expect_the_same_on_copies(compiled, module, x, 1);
  EXPECT_GT(compiled.explain({x.clone()}).interpreter, 0);
}

// Writing data in place changes no sizes (Swin's attention mask is filled slice by slice).
TEST(Specialize, ComputedSizesFoldAroundOpsThatWriteDataInPlace) {
  auto module = define(R"(
    def forward(self, x):
        y = torch.relu(x)
        mask = torch.zeros([y.size(0), y.size(1)])
        mask[0:1] = 2.0
        return y.view(y.size(0), -1) + mask.sum()
  )");
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({3, 4});
  EXPECT_EQ(compare(compiled.forward({x}), module.forward({x})), "");
  for (const ExplainEntry& entry : compiled.explain({x}).entries) {
    EXPECT_FALSE(entry.op == "aten::view" && entry.where == RunsIn::Interpreter)
        << compiled.explain({x}).to_text();
  }
}

}  // namespace
}  // namespace kiln
