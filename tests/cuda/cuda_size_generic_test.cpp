// Size-generic kernels (passes/kernel/size_terms.h) in the CUDA generator: one __global__
// function per kernel, taking its size inputs, emulated on the CPU (cuda_emulation.h) at many
// bindings (0, 1, primes, below and above the vector width) against the interpreter running the
// kernel bound there. A binding where the schedule's guards fail is one a shape class never
// launches the kernel at (its vector width, index type, block and row cache were chosen at the
// example binding): those are skipped, and each test says how many bindings must run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/cuda_emulation.h"
#include "cuda/test_kernels.h"
#include "kiln/error.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/size_guards.h"
#include "passes/kernel/size_terms.h"

namespace kiln::cuda_test {
namespace {

using namespace kernels;
using kernel::SizeTerm;
using Bindings = std::vector<std::vector<int64_t>>;

SizeTerm s(int input, int64_t coefficient = 1, int64_t constant = 0) {
  return {coefficient, {input}, constant};
}

/// A [s0, s1] kernel whose dense maps (strides {s1, 1}) follow s1 and whose broadcasts ({0, 1},
/// {1, 0}) follow nothing.
Kernel rows_generic(Kernel k) {
  k.size_inputs = {k.sizes[0], k.sizes[1]};
  k.size_terms = {s(0), s(1)};
  auto follow = [&](kernel::IndexMap& map) {
    map.stride_terms = {std::nullopt, std::nullopt};
    if (map.strides[0] == k.sizes[1] && map.strides[1] == 1) map.stride_terms[0] = s(1);
  };
  for (kernel::Expr& e : k.exprs)
    if (e.op == Op::Load) follow(e.map);
  for (kernel::Store& st : k.stores)
    follow(st.map);
  kernel::validate(k);
  return k;
}

void expect_bindings_run(const Kernel& generic, const Bindings& bindings, int at_least) {
  int run = 0;
  EXPECT_EQ(emulation_differences_at(generic, bindings, &run), "");
  EXPECT_GE(run, at_least) << generic.name;
}

TEST(CudaSizeGeneric, TheFunctionTakesItsSizesAndWritesNoExampleSize) {
  const Kernel generic = rows_generic(exp_mul({0, 1}));
  const codegen::cuda::CudaModuleSource module = codegen::cuda::emit_cuda_module({generic});
  ASSERT_TRUE(module.kernels.at(0).generic);
  const std::string& code = module.source;
  EXPECT_NE(code.find("const long long size0, const long long size1)"), std::string::npos) << code;
  // 64 x 256 at the example: neither the element count nor the row length is in the code.
  EXPECT_EQ(code.find("16384"), std::string::npos) << code;
  EXPECT_EQ(code.find("256;"), std::string::npos) << code;
  // A kernel of constant sizes keeps its literals and takes no sizes.
  const std::string fixed = codegen::cuda::emit_cuda_module({exp_mul({0, 1})}).source;
  EXPECT_EQ(fixed.find("long long size0"), std::string::npos);
  EXPECT_NE(fixed.find("16384"), std::string::npos);
}

TEST(CudaSizeGeneric, ElementwiseCodeServesEveryBindingOnBothPaths) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Bindings bindings = {{64, 256}, {0, 4},   {5, 0},   {1, 1},   {3, 7},   {2, 8},
                             {7, 9},    {13, 17}, {1, 531}, {257, 3}, {11, 64}, {2, 4}};
  // Rows of a multiple of 4 floats take the 16-byte path; the example says which path the code
  // was built for, and its guard keeps the others away.
  expect_bindings_run(rows_generic(exp_mul({0, 1})), bindings, 6);
  Kernel odd = make_kernel("k", {6, 7}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  {
    KernelBuilder b(odd);
    const int x = b.load(0, {7, 1});
    const int y = b.load(1, {0, 1});
    b.store(2, {7, 1}, b.binary(Op::Mul, b.unary(Op::Exp, x, DType::Float32), y, DType::Float32));
  }
  expect_bindings_run(rows_generic(odd), bindings, 5);
}

TEST(CudaSizeGeneric, OffsetsStridesAndSizesAsValuesFollowTheirTerms) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // out[s0, s1, 64] = x + y[64] + (s1 + 1), x the second half of a [s0, s1, 128] buffer: an
  // offset term, a stride term collapse_dims cannot merge away, and a size used as a value (a KV
  // cache's length plus one, as a position).
  constexpr int64_t kA = 3, kB = 5;
  const auto f = DType::Float32;
  Kernel k = make_kernel("half", {kA, kB, 64}, 0, {f, f}, {f});
  KernelBuilder b(k);
  const int x = b.load(0, {kB * 128, 128, 1}, kB * 64);
  const int y = b.load(1, {0, 0, 1});
  const int position = b.constant(kB + 1, f);
  b.store(2, {kB * 64, 64, 1}, b.binary(Op::Add, b.binary(Op::Add, x, y, f), position, f));
  k.size_inputs = {kA, kB};
  k.size_terms = {s(0), s(1), std::nullopt};
  k.exprs[x].map.stride_terms = {s(1, 128), std::nullopt, std::nullopt};
  k.exprs[x].map.offset_term = s(1, 64);
  k.exprs[position].constant_term = s(1, 1, 1);
  k.stores[0].map.stride_terms = {s(1, 64), std::nullopt, std::nullopt};
  kernel::validate(k);
  expect_bindings_run(k, {{3, 5}, {1, 1}, {2, 0}, {4, 2}, {7, 11}, {2, 37}}, 6);
}

TEST(CudaSizeGeneric, RowReductionsServeEveryRowLengthUpToTheRowCachesReach) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // Whole blocks of 256 threads and, for the rows walked twice, 8 elements each kept in
  // registers: every row of up to 2048 elements runs the code built at 300, short rows included.
  const Bindings bindings = {{3, 300}, {0, 300}, {1, 257},  {2, 311},  {5, 509},  {4, 512},
                             {2, 513}, {3, 200}, {1, 2},    {2, 1},    {3, 31},   {2, 33},
                             {1, 0},   {2, 97},  {1, 2047}, {1, 2048}, {1, 2049}, {2, 4099}};
  expect_bindings_run(rows_generic(layer_norm(3, 300)), bindings, 16);
  expect_bindings_run(rows_generic(softmax(3, 300)), bindings, 16);
  // One walk, no row cache: every row up to a split row's length.
  expect_bindings_run(rows_generic(row_sum(3, 300, ReduceKind::Mean)),
                      {{3, 300}, {1, 225}, {2, 1031}, {0, 600}, {7, 4099}, {2, 100}, {3, 1}}, 7);
  // Built at rows longer than the cache's reach, the code walks memory again: those lengths.
  expect_bindings_run(rows_generic(softmax(2, 3000)), {{2, 3000}, {1, 2049}, {3, 5000}, {1, 2048}},
                      3);
}

TEST(CudaSizeGeneric, ARowLengthMakesAtMostTwoSchedules) {
  // The row lengths of a stream of sequence lengths, 1 to 4096: one schedule up to the row
  // cache's reach and one above it, so a stream compiles two classes, not one per block size.
  std::vector<codegen::cuda::CudaSchedule> seen;
  for (int64_t row = 2; row <= 4096; row += 7) {
    codegen::cuda::CudaSchedule s =
        codegen::cuda::choose_cuda_schedule(kernel::collapse_dims(rows_generic(softmax(3, row))));
    s.blocks = 0;
    s.guards = {};
    if (std::find(seen.begin(), seen.end(), s) == seen.end()) seen.push_back(s);
  }
  EXPECT_EQ(seen.size(), 2u);
}

TEST(CudaSizeGeneric, ColumnsReduceAcrossRowsAtAnyCountOfThem) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // x.sum(0) of a [s1, s0] input: the kernel's rows are its s0 columns (4096 and more: across
  // rows), each s1 long; the column stride follows s0.
  Kernel k = column_sum(4096, 3);
  k.size_inputs = {4096, 3};
  k.size_terms = {s(0), s(1)};
  k.exprs[0].map.stride_terms = {std::nullopt, s(0)};
  k.stores[0].map.stride_terms = {std::nullopt, std::nullopt};
  kernel::validate(k);
  ASSERT_TRUE(codegen::cuda::choose_cuda_schedule(kernel::collapse_dims(k)).across_rows);
  expect_bindings_run(k, {{4096, 3}, {4097, 2}, {4133, 7}, {4096, 1}, {100, 3}}, 4);
}

TEST(CudaSizeGeneric, TheLaunchAtABindingIsTheOneItsOwnScheduleWouldMake) {
  // Where the guards of the schedule chosen at the example binding hold at another binding, the
  // kernel built there would have been given the same schedule, and the launch's block count is
  // the one that schedule gives there.
  int compared = 0;
  using Make = Kernel (*)(int64_t, int64_t);
  const Make makers[] = {[](int64_t r, int64_t n) { return rows_generic(layer_norm(r, n)); },
                         [](int64_t r, int64_t n) { return rows_generic(softmax(r, n)); }};
  for (const Make make : makers) {
    const Kernel example = kernel::collapse_dims(make(3, 300));
    const codegen::cuda::CudaSchedule schedule = codegen::cuda::choose_cuda_schedule(example);
    for (const std::vector<int64_t>& sizes :
         Bindings{{64, 256}, {7, 260}, {1000, 300}, {2, 8}, {5, 33}, {2, 3000}}) {
      const Kernel bound = kernel::bind_sizes(example, sizes);
      if (!kernel::guards_hold(schedule.guards, bound)) continue;
      codegen::cuda::CudaSchedule own =
          codegen::cuda::choose_cuda_schedule(kernel::collapse_dims(make(sizes[0], sizes[1])));
      EXPECT_EQ(codegen::cuda::cuda_blocks(bound, schedule), own.blocks) << sizes[1];
      own.blocks = schedule.blocks;
      own.guards = schedule.guards;
      EXPECT_EQ(own, schedule) << "the guards held, so the schedule is the same: " << sizes[1];
      ++compared;
    }
  }
  EXPECT_EQ(compared, 10);  // all but rows of 3000, past the row cache's reach, for both
}

TEST(CudaSizeGeneric, WhatItCannotEmitIsAClearError) {
  // A row split across blocks at the example binding: its workspace follows the rows.
  try {
    codegen::cuda::emit_cuda_module({rows_generic(layer_norm(2, 70001))});
    FAIL() << "a split size-generic kernel was emitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("split across blocks"), std::string::npos) << e.what();
  }
  // An example binding with a size input of 1, where a broadcast cannot be told from a size.
  Kernel one = rows_generic(exp_mul({0, 1}));
  one = kernel::bind_sizes(one, std::vector<int64_t>{1, 256});
  try {
    codegen::cuda::emit_cuda_module({one});
    FAIL() << "a kernel built at a size input of 1 was emitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size input s0 = 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::cuda_test
