// Large elementwise outputs, and the large element outputs of reductions over rows (softmax,
// layer_norm), use aligned non-temporal vector stores after a scalar head that reaches the first
// 64-byte line; any piece of the launch range, starting anywhere, must still write exactly what
// the reference interpreter writes. A large input read in more than one pass over each row is
// prefetched a row ahead (the last row's prefetch points past the buffer, harmlessly). The
// scratch row a softmax keeps its exps in is line-aligned, and its exp has no overflow clamp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/codegen/llvm/compile_kernels.h"
#include "backend/codegen/llvm/store_policy.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {
namespace {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;

constexpr int64_t kElements = (3 << 20) + 5;  // 12 MB of float32: past the streaming threshold

// The threshold on 4 KB pages, whatever this machine's pages are (store_policy.h).
CodegenOptions small_pages() {
  CodegenOptions options;
  options.stream_bytes = kStreamBytes;
  return options;
}

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
  const std::string assembly = kernels_assembly({scale_kernel()}, small_pages());
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
  CompiledKernels compiled = compile_kernels({k}, small_pages());
  const CompiledKernel& fn = compiled.kernels.at(0);
  // Pieces start at odd elements, so each piece's head is unaligned in a different way.
  std::vector<float> out(kElements, -12345.0f);
  void* buffers[] = {input.data(), out.data()};
  const int64_t cuts[] = {0, 1, 7, 12345, kElements / 2 + 3, kElements - 2, kElements};
  for (size_t i = 0; i + 1 < std::size(cuts); ++i)
    fn.function(buffers, nullptr, cuts[i], cuts[i + 1]);
  EXPECT_EQ(std::memcmp(out.data(), expected.data(), kElements * sizeof(float)), 0);
}

// out[r, i] = x[r, i] - max_i x[r, i] over rows of 1003 (not a multiple of 16 floats, so most
// rows start off a 64-byte line), 3000 rows: 12 MB out.
Kernel centered_rows_kernel() {
  Kernel k;
  k.name = "centered";
  k.sizes = {3000, 1003};
  k.reduce_rank = 1;
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  const int x = b.load(0, {1003, 1});
  b.store(1, {1003, 1}, b.binary(Op::Sub, x, b.reduce(kernel::ReduceKind::Max, x), DType::Float32));
  return k;
}

struct RowsRun {
  std::vector<float> out, expected;  // the kernel's, the reference interpreter's
};

// A kernel with one float input and one float output of n elements each, on values uniform in
// [-range, range], launched as the pieces [cuts[i], cuts[i + 1]) of its rows.
RowsRun run_rows_in_pieces(const Kernel& k, int64_t n, float range,
                           const std::vector<int64_t>& cuts) {
  std::vector<float> input(n);
  RowsRun run{std::vector<float>(n, -12345.0f), std::vector<float>(n)};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-range, range);
  for (float& v : input)
    v = dist(rng);
  kernel::interpret(k, {input.data(), run.expected.data()});
  CompiledKernels compiled = compile_kernels({k}, small_pages());
  void* buffers[] = {input.data(), run.out.data()};
  for (size_t i = 0; i + 1 < cuts.size(); ++i)
    compiled.kernels.at(0).function(buffers, nullptr, cuts[i], cuts[i + 1]);
  return run;
}

TEST(StreamingStoresTest, LargeRowOutputsOfReductionsStreamToo) {
  const Kernel k = centered_rows_kernel();
  const std::string assembly = kernels_assembly({k}, small_pages());
  EXPECT_NE(assembly.find("vmovntp"), std::string::npos) << assembly;
  // Two passes (the max, then the stores): the second one asks for the next row.
  EXPECT_NE(assembly.find("prefetcht0"), std::string::npos) << assembly;
  const RowsRun run = run_rows_in_pieces(k, 3000 * 1003, 10, {0, 1, 7, 1500, 2999, 3000});
  EXPECT_EQ(std::memcmp(run.out.data(), run.expected.data(), run.out.size() * sizeof(float)), 0);
}

// out = exp(x - max(x)) / sum(exp(x - max(x))) over rows of 1024: three passes over each row.
Kernel softmax_rows_kernel(int64_t rows = 64) {
  Kernel k;
  k.name = "softmax_rows";
  k.sizes = {rows, 1024};
  k.reduce_rank = 1;
  k.buffers = {{"b0", DType::Float32, false}, {"b1", DType::Float32, true}};
  KernelBuilder b(k);
  const int x = b.load(0, {1024, 1});
  const int m = b.reduce(kernel::ReduceKind::Max, x);
  const int e = b.unary(Op::Exp, b.binary(Op::Sub, x, m, DType::Float32), DType::Float32);
  const int s = b.reduce(kernel::ReduceKind::Sum, e);
  b.store(1, {1024, 1}, b.binary(Op::Div, e, s, DType::Float32));
  return k;
}

TEST(SoftmaxCodeTest, ExpsInALineAlignedScratchRowAndNoOverflowClamp) {
  const std::string assembly = kernels_assembly({softmax_rows_kernel()}, small_pages());
  // exp(x - max) is kept in a scratch row between the sum and the stores: on the stack, which
  // the kernel aligns to a 64-byte line (a vector straddling two lines costs two accesses).
  EXPECT_NE(assembly.find("andq\t$-64, %rsp"), std::string::npos) << assembly;
  // x - max(x) is <= 0: its exp needs no clamp at the overflow end (the only min in the kernel).
  EXPECT_EQ(assembly.find("vminp"), std::string::npos) << assembly;
}

TEST(SoftmaxCodeTest, OnlyInputsPastTheCachesArePrefetched) {
  // 64 rows (256 KB) stay in cache; 4096 rows (16 MB) do not.
  EXPECT_EQ(kernels_assembly({softmax_rows_kernel(64)}, small_pages()).find("prefetch"),
            std::string::npos);
  const Kernel large = softmax_rows_kernel(4096);
  const std::string assembly = kernels_assembly({large}, small_pages());
  EXPECT_NE(assembly.find("prefetcht0"), std::string::npos) << assembly;
  // And it still computes a softmax, for any piece of the rows.
  const RowsRun run = run_rows_in_pieces(large, 4096 * 1024, 20, {0, 3, 2048, 4095, 4096});
  double worst = 0;
  for (size_t i = 0; i < run.out.size(); ++i) {
    const double want = run.expected[i];
    worst = std::max(worst, std::abs(run.out[i] - want) / std::max(1e-30, std::abs(want)));
  }
  EXPECT_LT(worst, 1e-5);  // the vector exp's error and a reassociated sum against the oracle's
}

TEST(StorePolicyTest, OutputsUpToHalfTheL3StayInCacheOnlyOnHugePages) {
  constexpr int64_t l3 = 32 << 20;
  EXPECT_EQ(stream_bytes_for(false, l3), kStreamBytes);
  EXPECT_EQ(stream_bytes_for(true, l3), (16 << 20) + 1);     // a 16 MB output is kept
  EXPECT_EQ(stream_bytes_for(true, 0), kStreamBytes);        // an L3 the system does not report
  EXPECT_EQ(stream_bytes_for(true, 4 << 20), kStreamBytes);  // never below the floor
}

TEST(StorePolicyTest, HugePagesAreThoseTheKernelGivesOrPyTorchAsksFor) {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  const char* old = std::getenv("THP_MEM_ALLOC_ENABLE");
  const std::string saved = old ? old : "";
  setenv("THP_MEM_ALLOC_ENABLE", "1", 1);
  const bool asked = tensors_on_huge_pages();
  unsetenv("THP_MEM_ALLOC_ENABLE");
  const bool not_asked = tensors_on_huge_pages();
  if (old) setenv("THP_MEM_ALLOC_ENABLE", saved.c_str(), 1);
  const bool always = mode.find("[always]") != std::string::npos;
  const bool madvise = mode.find("[madvise]") != std::string::npos;
  EXPECT_EQ(asked, always || madvise) << mode;
  EXPECT_EQ(not_asked, always) << mode;
  EXPECT_GT(host_l3_bytes(), 0) << "no L3 size from /sys or sysconf";
}

// A layer norm's rows (16 MB out): streamed on small pages, kept on huge pages with a 32 MB L3,
// with the same results either way.
TEST(StorePolicyTest, ARowOutputOfHalfTheL3StreamsOnlyOnSmallPages) {
  const Kernel k = softmax_rows_kernel(4096);
  CodegenOptions huge;
  huge.stream_bytes = stream_bytes_for(true, 32 << 20);
  EXPECT_NE(kernels_assembly({k}, small_pages()).find("vmovntp"), std::string::npos);
  const std::string kept = kernels_assembly({k}, huge);
  EXPECT_EQ(kept.find("vmovntp"), std::string::npos) << kept;
  EXPECT_NE(kept.find("prefetcht0"), std::string::npos);  // the input still comes from memory
  std::vector<float> input(4096 * 1024), out(4096 * 1024, -1), expected(4096 * 1024);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-20, 20);
  for (float& v : input)
    v = dist(rng);
  kernel::interpret(k, {input.data(), expected.data()});
  CompiledKernels compiled = compile_kernels({k}, huge);
  void* buffers[] = {input.data(), out.data()};
  compiled.kernels.at(0).function(buffers, nullptr, 0, 4096);
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i)
    worst = std::max(
        worst, std::abs(out[i] - expected[i]) / std::max(1e-30, std::abs(double(expected[i]))));
  EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace kiln::codegen
