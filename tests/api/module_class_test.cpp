// Shape classes of a whole TorchScript module (backend/api/module_classes.h): a signature that
// differs from one compiled before only in some dims runs one size-generic specialization, whose
// size arithmetic its regions compute, with the results of LibTorch at every size.
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/stats.h"
#include "support/test_models.h"

namespace kiln {
namespace {

using testing::compare;

torch::jit::Module define(const std::string& source) {
  torch::jit::Module module("Sizes");
  module.register_parameter("weight", torch::randn({16, 16}), false);
  module.define(source);
  return module;
}

// Every call against LibTorch; returns the number of mismatches.
int mismatches(const CompiledModule& compiled, torch::jit::Module& module,
               const std::vector<at::Tensor>& inputs) {
  torch::NoGradGuard no_grad;
  int failed = 0;
  for (const at::Tensor& x : inputs) {
    const std::string diff = compare(compiled.forward({x}), module.forward({x}), 1e-4, 1e-5);
    if (!diff.empty()) {
      ADD_FAILURE() << x.sizes() << ": " << diff;
      ++failed;
    }
  }
  return failed;
}

// A view, a reshape and a slice whose sizes the forward computes from its input's.
const char* kTokens = R"(
    def forward(self, x):
        B, T, C = x.shape
        y = torch.matmul(x, self.weight).view(B, T, 4, C // 4).transpose(1, 2)
        y = torch.softmax(y, -1).reshape(B * T, C)
        return torch.relu(y[: T + 1] * 2.0)
)";

TEST(ModuleClass, AStreamOfLengthsCompilesTwiceAndMatches) {
  auto module = define(kTokens);
  auto compiled = compile(module);
  reset_stats();
  std::vector<at::Tensor> inputs;
  for (int64_t tokens : {5, 7, 2, 13, 64, 31, 7, 100, 3})
    inputs.push_back(torch::randn({2, tokens, 16}));
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  // The first length on its own, the second as the class, which every later one runs.
  EXPECT_EQ(compiled.num_specializations(), 2);
  const Stats stats = kiln::stats();
  EXPECT_EQ(stats.fallbacks, 0);
  EXPECT_GE(stats.shape_classes, 1);  // its region's class
  // Its one region runs without the interpreter, as the first length's does.
  torch::NoGradGuard no_grad;
  EXPECT_EQ(compiled.explain({torch::randn({2, 9, 16})}).interpreter, 0);
}

TEST(ModuleClass, SignaturesOutsideTheClassCompileOnTheirOwn) {
  auto module = define(kTokens);
  auto compiled = compile(module);
  std::vector<at::Tensor> inputs = {torch::randn({2, 5, 16}), torch::randn({2, 7, 16})};
  inputs.push_back(torch::randn({2, 1, 16}));                       // a size of 1
  inputs.push_back(torch::randn({2, 16, 9}).transpose(1, 2));       // another layout
  inputs.push_back(torch::randn({2, 8, 16}).requires_grad_(true));  // requires grad
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  EXPECT_EQ(compiled.num_specializations(), 5);
}

// A branch on a size stays a branch where the size is not folded: the class's graph leaves
// more to the interpreter, so the first ModuleClasses::kOwnCompiles (3) lengths compile on their
// own and the later ones run the class's specialization; past max_specializations too.
const char* kBranch = R"(
    def forward(self, x):
        y = torch.matmul(x, self.weight)
        if x.size(1) > 8:
            y = y * 2.0
        return torch.relu(y) - 1.0
)";

TEST(ModuleClass, ABranchOnASizeCompilesThreeLengthsThenRunsTheClass) {
  auto module = define(kBranch);
  auto compiled = compile(module);
  reset_stats();
  std::vector<at::Tensor> inputs;
  for (int64_t tokens : {5, 7, 12, 3, 30, 8, 9, 5, 7})
    inputs.push_back(torch::randn({2, tokens, 16}));
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  EXPECT_EQ(compiled.num_specializations(), 3);  // 5, 7 and 12
  EXPECT_EQ(kiln::stats().fallbacks, 0);
  torch::NoGradGuard no_grad;  // as the calls ran: grad mode is part of the signature
  EXPECT_EQ(compiled.explain({inputs[1]}).interpreter, 0);  // 7: its own, the branch folded
  EXPECT_GT(compiled.explain({inputs[3]}).interpreter, 0);  // 3: the class, with the branch
}

TEST(ModuleClass, ABranchOnASizeRunsTheClassPastTheLimit) {
  auto module = define(kBranch);
  auto compiled = compile(module, CompileOptions::parse("max_specializations=2"));
  reset_stats();
  std::vector<at::Tensor> inputs;
  for (int64_t tokens : {5, 7, 12, 3, 30})
    inputs.push_back(torch::randn({2, tokens, 16}));
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  EXPECT_EQ(compiled.num_specializations(), 2);
  EXPECT_EQ(kiln::stats().fallbacks, 0);  // none ran the module uncompiled
}

// The ranks of computed values do not vary with sizes: checks of them still fold in the class
// (`len(x.size())`, as torch.nn.functional's pooling asks), so it runs from the second length on.
TEST(ModuleClass, ChecksOfComputedRanksFoldInTheClass) {
  auto module = define(R"(
    def forward(self, x):
        y = torch.matmul(x, self.weight)
        assert y.dim() == 3 and len(y.size()) == 3
        return torch.relu(y).sum(1)
)");
  auto compiled = compile(module);
  std::vector<at::Tensor> inputs;
  for (int64_t tokens : {5, 7, 12, 3})
    inputs.push_back(torch::randn({2, tokens, 16}));
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  EXPECT_EQ(compiled.num_specializations(), 2);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(compiled.explain({torch::randn({2, 9, 16})}).interpreter, 0);
}

// A traced CNN (convolutions, batch norm, pooling) over a stream of batches.
TEST(ModuleClass, ATracedCnnOverBatchesCompilesTwiceAndMatches) {
  auto module = testing::load_model("cnn_traced");
  auto compiled = compile(module);
  std::vector<at::Tensor> inputs;
  for (int64_t batch : {2, 3, 5, 8, 4})
    inputs.push_back(torch::randn({batch, 3, 32, 32}));
  EXPECT_EQ(mismatches(compiled, module, inputs), 0);
  EXPECT_EQ(compiled.num_specializations(), 2);
}

}  // namespace
}  // namespace kiln
