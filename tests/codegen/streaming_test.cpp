// Large elementwise outputs use aligned non-temporal vector stores after a scalar head that
// reaches the first 64-byte line; any piece of the launch range, starting anywhere, must still
// write exactly what the reference interpreter writes.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/codegen/llvm/compile_kernels.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {
namespace {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;

constexpr int64_t kElements = (3 << 20) + 5;  // 12 MB of float32: past the streaming threshold

// out = max(a * 3, -1): no multiply feeds an add, so no FMA can change the rounding.
Kernel scale_kernel() {
  Kernel k;
  k.name = "scale";
  k.sizes = {kElements};
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  const int x = b.load(0, {1});
  const int y = b.binary(Op::Mul, x, b.constant(3, DType::Float32), DType::Float32);
  b.store(1, {1}, b.binary(Op::Max, y, b.constant(-1, DType::Float32), DType::Float32));
  return k;
}

TEST(StreamingStoresTest, AssemblyHasNonTemporalStores) {
  const std::string assembly = kernels_assembly({scale_kernel()}, {});
  EXPECT_NE(assembly.find("vmovntp"), std::string::npos) << assembly;
}

TEST(StreamingStoresTest, UnalignedPiecesMatchTheInterpreter) {
  const Kernel k = scale_kernel();
  std::vector<float> input(kElements), expected(kElements);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-10, 10);
  for (float& v : input)
    v = dist(rng);
  kernel::interpret(k, {input.data(), expected.data()});
  CompiledKernels compiled = compile_kernels({k}, {});
  const CompiledKernel& fn = compiled.kernels.at(0);
  // Pieces start at odd elements, so each piece's head is unaligned in a different way.
  std::vector<float> out(kElements, -12345.0f);
  void* buffers[] = {input.data(), out.data()};
  const int64_t cuts[] = {0, 1, 7, 12345, kElements / 2 + 3, kElements - 2, kElements};
  for (size_t i = 0; i + 1 < std::size(cuts); ++i)
    fn.function(buffers, cuts[i], cuts[i + 1]);
  EXPECT_EQ(std::memcmp(out.data(), expected.data(), kElements * sizeof(float)), 0);
}

}  // namespace
}  // namespace kiln::codegen
