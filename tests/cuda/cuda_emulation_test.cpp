// The generated CUDA C run on the CPU (cuda_emulation.h: every thread of a block an OS thread)
// and compared with the kernel IR's reference interpreter on the same inputs, including NaN, inf
// and signed zeros. No GPU needed; scripts/gpu-check runs the same code on a real one.
// Tolerances: see emulation_differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda/cuda_emulation.h"
#include "cuda/test_kernels.h"
#include "passes/kernel/interpreter.h"

namespace kiln::cuda_test {
namespace {

using namespace kernels;

TEST(CudaEmulation, GeneratedKernelsComputeWhatTheInterpreterDoes) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<Kernel> kernels;
  for (Kernel& k : test_kernels()) {
    // The long rows stay (split reductions); the rest is shrunk only where huge.
    kernels.push_back(std::move(k));
  }
  EXPECT_EQ(emulation_differences(kernels), "");
}

TEST(CudaEmulation, InPlaceKernelReadsBeforeItWrites) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // out = x * y + x over [64, 256]: exact arithmetic, so the bytes must match.
  Kernel k = make_kernel("k", {64, 256}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x0 = b.load(0, {256, 1}), y0 = b.load(1, {256, 1});
  b.store(2, {256, 1},
          b.binary(Op::Add, b.binary(Op::Mul, x0, y0, DType::Float32), x0, DType::Float32));
  std::mt19937_64 rng(3);
  Bytes x = random_buffer(DType::Float32, 64 * 256, rng);
  Bytes y = random_buffer(DType::Float32, 64 * 256, rng);
  Bytes want(x.size());
  kernel::interpret(k, {x.data(), y.data(), want.data()});
  k.in_place = {{0, 2}};
  EmulatedModule emulated(codegen::cuda::emit_cuda_module({k}));
  emulated.launch(0, {x.data(), y.data(), x.data()}, 3);  // the output over x
  EXPECT_EQ(std::memcmp(x.data(), want.data(), want.size()), 0);
}

}  // namespace
}  // namespace kiln::cuda_test
