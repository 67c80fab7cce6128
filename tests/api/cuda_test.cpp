// kiln::compile with CUDA inputs: the plan runs on the GPU (generated CUDA kernels and ATen's CUDA
// kernels) and matches LibTorch there. Needs a GPU and a build with -DKILN_TORCH_CUDA=ON
// (scripts/gpu-check); skipped otherwise.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include "kiln/kiln.h"
#include "support/test_models.h"

namespace kiln {
namespace {

using testing::compare;
using testing::load_model;

#define SKIP_WITHOUT_CUDA() \
  if (!at::hasCUDA()) GTEST_SKIP() << "needs a GPU and a build with -DKILN_TORCH_CUDA=ON"

TEST(Cuda, MlpOnCudaMatchesLibTorchAndRunsGeneratedKernels) {
  SKIP_WITHOUT_CUDA();
  auto module = load_model("mlp");
  module.to(torch::kCUDA);
  auto compiled = compile(module);
  torch::NoGradGuard no_grad;
  std::vector<c10::IValue> inputs = {torch::randn({8, 64}, torch::kCUDA)};
  const c10::IValue got = compiled.forward(inputs);
  ASSERT_TRUE(got.toTensor().is_cuda());
  EXPECT_EQ(compare(got.toTensor().cpu(), module.forward(inputs).toTensor().cpu(), 1e-4, 1e-4), "");
  const Explanation explanation = compiled.explain(inputs);
  EXPECT_GE(explanation.fused_kernels, 2) << explanation.to_text();
  EXPECT_EQ(explanation.fallback_regions, 0) << explanation.to_text();
}

TEST(Cuda, TargetCudaRunsOnCudaInputs) {
  SKIP_WITHOUT_CUDA();
  auto module = load_model("mlp");
  module.to(torch::kCUDA);
  CompileOptions options;
  options.target = Target::CUDA;
  auto compiled = compile(module, options);
  torch::NoGradGuard no_grad;
  std::vector<c10::IValue> inputs = {torch::randn({4, 64}, torch::kCUDA)};
  EXPECT_EQ(compare(compiled.forward(inputs).toTensor().cpu(),
                    module.forward(inputs).toTensor().cpu(), 1e-4, 1e-4),
            "");
}

}  // namespace
}  // namespace kiln
