// What the JIT really runs: the optimized assembly of kernels (kernels_assembly) uses packed vector
// instructions, and float32 transcendental functions are inlined, not called.
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/codegen/llvm/compile_kernels.h"
#include "passes/kernel/kernel.h"
#include "runtime/jit/orc_jit.h"

namespace kiln::codegen {
namespace {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;
using kernel::ReduceKind;

Kernel make_kernel(std::vector<int64_t> sizes, int reduce_rank, DType t, int inputs) {
  Kernel k;
  k.name = "k";
  k.sizes = std::move(sizes);
  k.reduce_rank = reduce_rank;
  for (int i = 0; i <= inputs; ++i)
    k.buffers.push_back({"b" + std::to_string(i), t, i == inputs});
  return k;
}

// out = (a + b) * a over 4099 float32 elements.
Kernel add_mul_kernel() {
  Kernel k = make_kernel({4099}, 0, DType::Float32, 2);
  KernelBuilder b(k);
  const int a = b.load(0, {1});
  b.store(
      2, {1},
      b.binary(Op::Mul, b.binary(Op::Add, a, b.load(1, {1}), DType::Float32), a, DType::Float32));
  return k;
}

// out[r] = sum(x[r, :]) over rows of 4096 float32 elements.
Kernel row_sum_kernel() {
  Kernel k = make_kernel({64, 4096}, 1, DType::Float32, 1);
  KernelBuilder b(k);
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, b.load(0, {4096, 1})));
  return k;
}

Kernel exp_kernel(DType t) {
  Kernel k = make_kernel({4099}, 0, t, 1);
  KernelBuilder b(k);
  b.store(1, {1}, b.unary(Op::Exp, b.load(0, {1}), t));
  return k;
}

std::string assembly(const Kernel& k, int vector_bits) {
  CodegenOptions options;
  options.vector_bits = vector_bits;
  return kernels_assembly({k}, options);
}

/// Lines of `text` whose instruction is `mnemonic` with a 256- or 512-bit register operand.
int packed(const std::string& text, const std::string& mnemonic) {
  const std::regex line("^\\s*" + mnemonic + "\\s+.*%(ymm|zmm)[0-9]+");
  std::istringstream in(text);
  int count = 0;
  for (std::string l; std::getline(in, l);)
    count += std::regex_search(l, line) ? 1 : 0;
  return count;
}

/// Lines that call a function, or tail-call one (a jump to a symbol, not to a local .L label).
int calls(const std::string& text) {
  const std::regex call("^\\s*call[a-z]*\\s"), tail_call("^\\s*jmp[a-z]*\\s+[A-Za-z_*]");
  std::istringstream in(text);
  int count = 0;
  for (std::string l; std::getline(in, l);)
    count += std::regex_search(l, call) || std::regex_search(l, tail_call) ? 1 : 0;
  return count;
}

std::vector<int> wide_vector_bits() {
  std::vector<int> bits = {256};
  if (("," + jit::host_target().features + ",").find(",+avx512f,") != std::string::npos)
    bits.push_back(512);
  return bits;
}

TEST(VectorizationTest, Float32ElementwiseUsesPackedInstructions) {
  for (int bits : wide_vector_bits()) {
    const std::string s = assembly(add_mul_kernel(), bits);
    EXPECT_GT(packed(s, "vaddps"), 0) << "vector_bits " << bits << "\n" << s;
    EXPECT_GT(packed(s, "vmulps"), 0) << "vector_bits " << bits << "\n" << s;
  }
}

TEST(VectorizationTest, HostDefaultWidthUsesPackedInstructions) {
  if (jit::host_target().features.find("+avx") == std::string::npos)
    GTEST_SKIP() << "no AVX: no 256-bit registers";
  const std::string s = assembly(add_mul_kernel(), 0);
  EXPECT_GT(packed(s, "vmulps"), 0) << s;
}

TEST(VectorizationTest, Avx512WidthUsesZmmRegisters) {
  if (wide_vector_bits().back() != 512) GTEST_SKIP() << "no AVX-512 on this host";
  const std::string s = assembly(add_mul_kernel(), 512);
  EXPECT_NE(s.find("%zmm"), std::string::npos) << s;
}

TEST(VectorizationTest, Float32RowSumUsesPackedAdds) {
  for (int bits : wide_vector_bits()) {
    const std::string s = assembly(row_sum_kernel(), bits);
    // The loop's accumulators, not only the final fold: several packed adds.
    EXPECT_GE(packed(s, "vaddps"), 4) << "vector_bits " << bits << "\n" << s;
  }
}

TEST(VectorizationTest, Float32ExpIsInlinedWithoutCalls) {
  for (int bits : wide_vector_bits()) {
    const std::string s = assembly(exp_kernel(DType::Float32), bits);
    EXPECT_EQ(calls(s), 0) << "vector_bits " << bits << "\n" << s;
    EXPECT_EQ(s.find("expf"), std::string::npos) << s;
    EXPECT_GT(packed(s, "vfmadd[0-9]+ps") + packed(s, "vmulps"), 0) << s;
  }
}

TEST(VectorizationTest, Float64ExpCallsTheCLibrary) {
  // The contrast that shows `calls` finds calls: float64 exp goes to libm, lane by lane.
  EXPECT_GT(calls(assembly(exp_kernel(DType::Float64), 256)), 0);
}

}  // namespace
}  // namespace kiln::codegen
