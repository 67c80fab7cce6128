// A plan's fresh kernels split into modules compiled on several threads: every kernel in exactly
// one group, groups of about equal work, none for a handful of kernels; errors from any thread
// reach the caller; and kernels compiled on two threads compute what the interpreter does.
#include "backend/codegen/llvm/compile_groups.h"

#include <atomic>
#include <stdexcept>

#include "tests/codegen/codegen_harness.h"

namespace kiln::codegen {
namespace codegen_test {
namespace {

// out = x * (k + 1) + ... : kernels of different sizes (k + 1 multiplies), so of different cost.
Kernel chain_kernel(int k) {
  Kernel kernel = make_kernel("chain_" + std::to_string(k), {kN}, 0, {F32}, {F32});
  KernelBuilder b(kernel);
  int v = b.load(0, {1});
  for (int i = 0; i <= k; ++i)
    v = b.binary(Op::Add, b.binary(Op::Mul, v, b.constant(0.5, F32), F32), b.constant(i, F32), F32);
  b.store(1, {1}, v);
  return kernel;
}

TEST(CompileGroupsTest, EveryKernelOnceInGroupsOfAboutEqualWork) {
  std::vector<Kernel> kernels;
  for (int k = 0; k < 17; ++k)
    kernels.push_back(chain_kernel(k % 6));
  for (int threads : {1, 2, 3, 8}) {
    const auto groups = compile_groups(kernels, threads);
    EXPECT_EQ(groups.size(), std::min<size_t>(threads, 17 / kMinKernelsPerModule));
    std::vector<int> seen(kernels.size(), 0);
    size_t largest = 0, smallest = SIZE_MAX;
    for (const auto& group : groups) {
      EXPECT_TRUE(std::is_sorted(group.begin(), group.end()));
      size_t work = 0;
      for (size_t i : group) {
        ++seen[i];
        work += kernels[i].exprs.size() + kernels[i].stores.size();
      }
      largest = std::max(largest, work);
      smallest = std::min(smallest, work);
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(kernels.size()));
    // Greedy by cost, largest first: groups differ by at most the costliest kernel.
    EXPECT_LE(largest - smallest, chain_kernel(5).exprs.size() + 1) << threads << " threads";
  }
  EXPECT_EQ(compile_groups({chain_kernel(1), chain_kernel(2), chain_kernel(3)}, 4).size(), 1u);
  EXPECT_EQ(compile_groups({}, 4).size(), 0u);
}

TEST(CompileGroupsTest, RunConcurrentlyRunsEveryPieceAndRethrowsAFailure) {
  std::atomic<int> ran{0};
  run_concurrently(5, [&](size_t) { ++ran; });
  EXPECT_EQ(ran.load(), 5);
  run_concurrently(0, [&](size_t) { ++ran; });
  EXPECT_EQ(ran.load(), 5);
  EXPECT_THROW(run_concurrently(3,
                                [&](size_t i) {
                                  ++ran;
                                  if (i == 2) throw std::runtime_error("piece 2 failed");
                                }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 8);  // the others still ran, and were waited for
}

TEST(CompileGroupsTest, KernelsCompiledOnTwoThreadsComputeWhatTheInterpreterDoes) {
  std::vector<Case> cases;
  for (int k = 0; k < 12; ++k)
    cases.push_back(make_case(chain_kernel(k), {uniform(-4, 4)}, ulps(0)));
  std::vector<Kernel> kernels;
  for (const Case& c : cases)
    kernels.push_back(c.kernel);
  CodegenOptions options;
  options.compile_threads = 2;
  options.reuse_kernels = false;
  const CompiledKernels compiled = compile_kernels(kernels, options);
  ASSERT_EQ(compiled.kernels.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<Bytes> want = fresh_buffers(cases[i]), got = fresh_buffers(cases[i]);
    kernel::interpret(cases[i].kernel, pointers(want));
    const std::vector<void*> p = pointers(got);
    compiled.kernels[i].function(p.data(), nullptr, 0, compiled.kernels[i].range);
    expect_same_outputs(cases[i], want, got, "two compile threads", 0);
  }
}

}  // namespace
}  // namespace codegen_test
}  // namespace kiln::codegen
