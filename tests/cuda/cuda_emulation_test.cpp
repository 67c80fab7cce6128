// The generated CUDA C run on the CPU (cuda_emulation.h: every thread of a block an OS thread)
// and compared with the kernel IR's reference interpreter on the same inputs, including NaN, inf
// and signed zeros. No GPU needed; scripts/gpu-check runs the same code on a real one.
// Tolerances: see emulation_differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cuda/cuda_emulation.h"
#include "cuda/test_kernels.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/interpreter.h"
#include "tests/support/kernel_buffers.h"

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

TEST(CudaEmulation, SplitRowsWalkedSeveralTimesMatchTheInterpreter) {
  // One launch per walk (cuda_schedule.h: phases), each reading what the previous left in the
  // workspace. Finite inputs (the shared test kernels' NaNs would make every such row NaN, which
  // hides a wrong value passed between phases); rows that end inside a slice.
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const std::vector<Kernel> kernels = {softmax(3, 100003), layer_norm(2, 70001)};
  EmulatedModule emulated(codegen::cuda::emit_cuda_module(kernels));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uniform(-3, 3);
  for (size_t index = 0; index < kernels.size(); ++index) {
    const Kernel& k = kernels[index];
    EXPECT_GT(codegen::cuda::choose_cuda_schedule(kernel::collapse_dims(k)).phases, 1);
    std::vector<std::vector<float>> want, got;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      std::vector<float> values(testing::buffer_elements(k, static_cast<int>(b)));
      for (float& v : values)
        v = k.buffers[b].is_output ? -1.0f : uniform(rng);
      want.push_back(values);
      got.push_back(values);
    }
    std::vector<void*> want_pointers, got_pointers;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      want_pointers.push_back(want[b].data());
      got_pointers.push_back(got[b].data());
    }
    kernel::interpret(k, want_pointers);
    emulated.launch(static_cast<int>(index), got_pointers, 5);
    for (size_t b = 1; b < k.buffers.size(); ++b) {
      double worst = 0;
      for (size_t i = 0; i < want[b].size(); ++i) {
        worst = std::max(worst, std::fabs(double{got[b][i]} - want[b][i]) /
                                    std::max(std::fabs(double{want[b][i]}), 1e-3));
      }
      // Sums of 1e5 floats in another order: a relative difference of a few 1e-6.
      EXPECT_LT(worst, 1e-4) << "kernel " << index << " buffer b" << b;
    }
  }
}

TEST(CudaEmulation, FloatToIntegerOfNaNInfAndOutOfRangeMatchesTheInterpreter) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // A C cast is undefined there (and a GPU's cvt saturates): the prelude gives eager's results.
  const std::vector<double> x = {NAN,          INFINITY,      -INFINITY,    3e9,   -3e9,
                                 1e20,         300.7,         -300.7,       -1.5,  70000,
                                 4294967596.0, -2147483948.0, 2147483520.0, 9.3e18};
  const auto n = static_cast<int64_t>(x.size());
  std::vector<Kernel> casts;
  for (DType from : {DType::Float32, DType::Float64})
    for (DType to : {DType::Int64, DType::Int32, DType::Int8, DType::UInt8}) {
      Kernel k = make_kernel("cast", {n}, 0, {from}, {to});
      KernelBuilder b(k);
      b.store(1, {1}, b.cast(b.load(0, {1}), to));
      casts.push_back(std::move(k));
    }
  EmulatedModule emulated(codegen::cuda::emit_cuda_module(casts));
  for (size_t index = 0; index < casts.size(); ++index) {
    const Kernel& k = casts[index];
    Bytes in(n * ir::dtype_size(k.buffers[0].dtype));
    for (int64_t i = 0; i < n; ++i)
      testing::put_element(k.buffers[0].dtype, in.data() + i * ir::dtype_size(k.buffers[0].dtype),
                           x[i]);
    Bytes want(n * ir::dtype_size(k.buffers[1].dtype)), got(want.size(), 0xAB);
    kernel::interpret(k, {in.data(), want.data()});
    emulated.launch(static_cast<int>(index), {in.data(), got.data()}, 1);
    EXPECT_EQ(got, want) << ir::dtype_name(k.buffers[0].dtype) << " to "
                         << ir::dtype_name(k.buffers[1].dtype);
  }
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
