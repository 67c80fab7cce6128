// Size-generic kernels (passes/kernel/size_terms.h) compiled once by the LLVM code generator and
// run at many bindings of their size inputs, each checked against the interpreter running the
// kernel bound there (bind_sizes). Bindings include 0, 1, primes, and sizes below and above
// every vector width; a binding may fail the schedule's guards (the schedule was taken at the
// example binding), which costs speed but never correctness. Tolerances as
// kernel_codegen_test.cpp states them, at the binding's sizes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/codegen_harness.h"
#include "passes/ir/parser.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/generalize.h"
#include "passes/kernel/lower_group.h"
#include "passes/kernel/size_terms.h"

namespace kiln::codegen {
namespace {

using namespace codegen_test;
using kernel::SizeTerm;
using Binding = std::vector<int64_t>;
using ToleranceAt = std::function<Tolerance(int vector_bits, const Binding& sizes)>;

SizeTerm s(int input, int64_t coefficient = 1) {
  return {coefficient, {input}};
}

/// Compiles `generic` once per vector width, then runs that code at each binding.
void check_bindings(
    const Kernel& generic, const std::vector<Binding>& bindings, const Fill& fill,
    const ToleranceAt& tolerance = [](int, const Binding&) { return Tolerance{}; }) {
  kernel::validate(generic);
  ASSERT_TRUE(kernel::is_size_generic(generic));
  checked_kernels().push_back(generic);  // NVRTC compiles its CUDA C too, size-generic
  for (int bits : vector_widths()) {
    CodegenOptions options;
    options.vector_bits = bits;
    const CompiledKernels compiled = compile_kernels({generic}, options);
    const CompiledKernel& fn = compiled.kernels.at(0);
    ASSERT_TRUE(fn.launch_at) << generic.name;
    for (const Binding& sizes : bindings) {
      std::string name = generic.name + " at";
      for (int64_t v : sizes)
        name += " " + std::to_string(v);
      Kernel bound = kernel::bind_sizes(generic, sizes);
      bound.name = name;
      const Case c = make_case(bound, {fill}, [&, sizes](int b) { return tolerance(b, sizes); });
      std::vector<Bytes> want = fresh_buffers(c);
      kernel::interpret(bound, pointers(want));
      std::vector<Bytes> whole = fresh_buffers(c);
      run_compiled_kernel(fn, pointers(whole), {}, sizes.data());
      expect_same_outputs(c, want, whole, "whole range", bits);
      std::vector<Bytes> pieces = fresh_buffers(c);
      run_compiled_kernel(fn, pointers(pieces), cuts(fn.launch_at(sizes.data()).range),
                          sizes.data());
      expect_same_outputs(c, want, pieces, "in pieces", bits);
    }
  }
}

// out = x * y + x over [s0, s1]: x and out dense, y one value per column (a bias).
Kernel bias_kernel(int64_t rows, int64_t n) {
  Kernel k = make_kernel("bias", {rows, n}, 0, {F32, F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {n, 1});
  const int y = b.load(1, {0, 1});
  b.store(2, {n, 1}, b.binary(Op::Add, b.binary(Op::Mul, x, y, F32), x, F32));
  k.size_inputs = {rows, n};
  k.size_terms = {s(0), s(1)};
  k.exprs[x].map.stride_terms = {s(1), std::nullopt};
  k.stores[0].map.stride_terms = {s(1), std::nullopt};
  return k;
}

TEST(SizeGenericCodegen, TheScheduleSaysWhichBindingsItWasChosenFor) {
  // Streaming stores past 64 KB of output: the example (6 x 40 floats) streams none, so its code
  // serves a binding of two megabytes correctly, but with another schedule than that binding's
  // own; schedule_holds says so (a shape class then compiles those sizes apart).
  CodegenOptions options;
  options.vector_bits = 256;
  options.stream_bytes = 64 << 10;
  const CompiledKernels compiled = compile_kernels({bias_kernel(6, 40)}, options);
  const CompiledKernel& fn = compiled.kernels.at(0);
  ASSERT_TRUE(fn.schedule_holds);
  const Binding small = {7, 64}, large = {512, 1024};
  EXPECT_TRUE(fn.schedule_holds(small.data()));
  EXPECT_FALSE(fn.schedule_holds(large.data()));
  // A kernel of constant sizes needs no such test.
  const CompiledKernels fixed =
      compile_kernels({kernel::without_terms(bias_kernel(6, 40))}, options);
  EXPECT_FALSE(fixed.kernels.at(0).schedule_holds);
}

TEST(SizeGenericCodegen, OneElementwiseCodeServesEveryRowCountAndRowLength) {
  check_bindings(bias_kernel(6, 40),
                 {{6, 40},
                  {0, 5},
                  {5, 0},
                  {1, 1},
                  {3, 7},
                  {2, 8},
                  {7, 9},
                  {13, 17},
                  {1, 531},
                  {257, 3},
                  {11, 64}},
                 uniform(-3, 3));
}

// out[s0, s1, 64] = x + y[64], where x is the second half of a [s0, s1, 128] buffer: an offset
// term (64) and a stride term (128 * s1) that collapse_dims cannot merge away.
TEST(SizeGenericCodegen, OffsetsAndStridesFollowTheirTerms) {
  constexpr int64_t kA = 3, kB = 5;
  Kernel k = make_kernel("half", {kA, kB, 64}, 0, {F32, F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {kB * 128, 128, 1}, kB * 64);
  const int y = b.load(1, {0, 0, 1});
  b.store(2, {kB * 64, 64, 1}, b.binary(Op::Add, x, y, F32));
  k.size_inputs = {kA, kB};
  k.size_terms = {s(0), s(1), std::nullopt};
  k.exprs[x].map.stride_terms = {s(1, 128), std::nullopt, std::nullopt};
  k.exprs[x].map.offset_term = s(1, 64);
  k.stores[0].map.stride_terms = {s(1, 64), std::nullopt, std::nullopt};
  check_bindings(k, {{3, 5}, {1, 1}, {2, 0}, {4, 2}, {7, 11}}, uniform(-2, 2));
}

// softmax over rows of s1, s0 rows: the exps are cached per row at the example (128 elements),
// which a row longer than kMaxCachedRow cannot be, so its code computes them again.
Kernel softmax_kernel(int64_t rows, int64_t n) {
  Kernel k = kiln::testing::softmax_kernel(rows, n);
  k.size_inputs = {rows, n};
  k.size_terms = {s(0), s(1)};
  k.exprs[0].map.stride_terms = {s(1), std::nullopt};
  k.stores[0].map.stride_terms = {s(1), std::nullopt};
  return k;
}

TEST(SizeGenericCodegen, SoftmaxRowsOfAnyLengthWithAndWithoutTheRowCache) {
  const Kernel k = softmax_kernel(4, 128);
  const CpuSchedule schedule =
      schedule_cpu_kernel(kernel::collapse_dims(k), code_variant(CodegenOptions{}).target);
  EXPECT_FALSE(schedule.row_caches.empty());  // else the uncached rows test nothing new
  check_bindings(k,
                 {{4, 128},
                  {3, 1},
                  {2, 0},
                  {0, 9},
                  {5, 7},
                  {2, 16},
                  {3, 33},
                  {2, 1000},
                  {2, kMaxCachedRow},
                  {2, kMaxCachedRow + 3}},
                 uniform(-4, 4), [](int bits, const Binding& sizes) {
                   return Tolerance{0, sum_error(bits, sizes[1], 1) + 6 * kU32, 0};
                 });
}

// Rows one longer than the size input (a KV cache's P + 1 after the new token): a term with a
// constant, in the sizes and in the row stride.
TEST(SizeGenericCodegen, RowsOfASizePlusOne) {
  Kernel k = kiln::testing::softmax_kernel(4, 9);
  const SizeTerm plus_one{1, {1}, 1};
  k.size_inputs = {4, 8};
  k.size_terms = {s(0), plus_one};
  k.exprs[0].map.stride_terms = {plus_one, std::nullopt};
  k.stores[0].map.stride_terms = {plus_one, std::nullopt};
  check_bindings(k, {{4, 8}, {3, 2}, {2, 0}, {5, 15}, {2, 100}}, uniform(-4, 4),
                 [](int bits, const Binding& sizes) {
                   return Tolerance{0, sum_error(bits, sizes[1] + 1, 1) + 6 * kU32, 0};
                 });
}

// An image's channels past strides that floor its sides: [4, s0 - 1, 2*s1 + 1] (an unpadded
// stride-2 pool's rows, a side off its step), each channel a plane of (s0-1)*(2*s1+1): sizes
// with constants, and strides that are products of shifted factors.
TEST(SizeGenericCodegen, PlanesOfShiftedSides) {
  const SizeTerm rows{1, {0}, -1}, columns{2, {1}, 1};
  const SizeTerm plane{1, {0, 1}, 0, {{1, -1}, {2, 1}}};
  Kernel k = make_kernel("planes", {4, 4, 9}, 0, {F32, F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {36, 9, 1});
  const int y = b.load(1, {1, 0, 0});
  b.store(2, {36, 9, 1}, b.binary(Op::Mul, x, y, F32));
  k.size_inputs = {5, 4};
  k.size_terms = {std::nullopt, rows, columns};
  k.exprs[x].map.stride_terms = {plane, columns, std::nullopt};
  k.stores[0].map.stride_terms = {plane, columns, std::nullopt};
  check_bindings(k, {{5, 4}, {2, 2}, {1, 3}, {9, 3}, {17, 7}, {3, 40}}, uniform(-2, 2));
}

// out = x * s1 + s0 (a length and a position used as values: constants that follow the size
// inputs), in float32 and int64.
TEST(SizeGenericCodegen, ConstantsThatFollowTheSizeInputs) {
  for (DType t : {F32, I64}) {
    Kernel k = make_kernel(std::string("scale_") + ir::dtype_name(t), {3, 40}, 0, {t}, {t});
    KernelBuilder b(k);
    const int length = b.constant(40, t), position = b.constant(3, t);
    const int x = b.load(0, {40, 1});
    b.store(1, {40, 1}, b.binary(Op::Add, b.binary(Op::Mul, x, length, t), position, t));
    k.size_inputs = {3, 40};
    k.size_terms = {s(0), s(1)};
    k.exprs[x].map.stride_terms = {s(1), std::nullopt};
    k.stores[0].map.stride_terms = {s(1), std::nullopt};
    k.exprs[length].constant_term = s(1);
    k.exprs[position].constant_term = s(0);
    check_bindings(k, {{3, 40}, {1, 1}, {7, 9}, {2, 300}}, ints(-50, 50));
  }
}

// The mean and variance of each row (one pass, moments.h) and y = (x - mean) * rsqrt(var + eps):
// a row shorter than a vector takes the two passes; a row's mean divides by its run-time length.
TEST(SizeGenericCodegen, LayerNormOverRowsOfAnyLength) {
  constexpr int64_t kRows = 3, kN = 96;
  Kernel k = make_kernel("layer_norm", {kRows, kN}, 1, {F32}, {F32, F32});
  KernelBuilder b(k);
  const int x = b.load(0, {kN, 1});
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int d = b.binary(Op::Sub, x, mean, F32);
  const int var = b.reduce(ReduceKind::Mean, b.binary(Op::Mul, d, d, F32));
  const int rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.constant(1e-5, F32), F32), F32);
  b.store(1, {kN, 1}, b.binary(Op::Mul, d, rstd, F32));
  b.store(2, {1, 0}, mean);
  k.size_inputs = {kRows, kN};
  k.size_terms = {s(0), s(1)};
  k.exprs[x].map.stride_terms = {s(1), std::nullopt};
  k.stores[0].map.stride_terms = {s(1), std::nullopt};
  const CpuSchedule schedule =
      schedule_cpu_kernel(kernel::collapse_dims(k), code_variant(CodegenOptions{}).target);
  ASSERT_FALSE(schedule.row_passes.empty());
  EXPECT_TRUE(schedule.row_passes[0].moments);
  // x is U(1, 5): as layer_norm_case in reduction_codegen_test.cpp.
  check_bindings(k, {{3, 96}, {2, 1}, {2, 2}, {3, 3}, {2, 8}, {2, 13}, {1, 16}, {4, 17}, {2, 769}},
                 uniform(1, 5), [](int bits, const Binding& sizes) {
                   const int64_t n = std::max<int64_t>(sizes[1], 1);
                   return Tolerance{4, 16 * kU32, 10 * sum_error(bits, n, n * 5.0) / n / 1.15};
                 });
}

// x.sum(0) and x.mean(0) over [s0, s1], x row-major: rows of s1 side by side, reduced across
// (across_rows_emitter.h), each lane adding its column in chunks where the example says so.
TEST(SizeGenericCodegen, ReductionsAcrossRowsOfAnyCount) {
  constexpr int64_t kRows = 40, kColumns = 48;
  Kernel k = make_kernel("column_sums", {kColumns, kRows}, 1, {F32}, {F32, F32});
  KernelBuilder b(k);
  const int x = b.load(0, {1, kColumns});
  b.store(1, {1, 0}, b.reduce(ReduceKind::Sum, x));
  b.store(2, {1, 0}, b.reduce(ReduceKind::Mean, x));
  k.size_inputs = {kRows, kColumns};
  k.size_terms = {s(1), s(0)};
  k.exprs[x].map.stride_terms = {std::nullopt, s(1)};
  const CpuSchedule schedule =
      schedule_cpu_kernel(kernel::collapse_dims(k), code_variant(CodegenOptions{}).target);
  EXPECT_EQ(schedule.strategy, CpuSchedule::Strategy::AcrossRows);
  check_bindings(k, {{40, 48}, {1, 1}, {0, 5}, {3, 0}, {31, 7}, {32, 9}, {100, 3}, {5, 70}},
                 uniform(-1, 1), [](int bits, const Binding& sizes) {
                   const int64_t n = std::max<int64_t>(sizes[0], 1);
                   const double bound = sum_error(bits, n, static_cast<double>(n));
                   return Tolerance{0, 2 * kU32, bound / n};
                 });
}

// A float sum along rows the schedule walks in chunks of kSumChunk at every length: none, one
// and a part, two exactly.
TEST(SizeGenericCodegen, LongRowSumsInChunks) {
  Kernel k = reduce_kernel(ReduceKind::Sum, F32, 2, 64);
  k.size_inputs = {64};
  k.size_terms = {std::nullopt, s(0)};
  k.exprs[0].map.stride_terms = {s(0), std::nullopt};
  check_bindings(k, {{64}, {2}, {5}, {kSumChunk}, {kSumChunk + 7}, {2 * kSumChunk}}, uniform(-1, 1),
                 [](int bits, const Binding& sizes) {
                   return Tolerance{0, 0, sum_error(bits, sizes[0], sizes[0])};
                 });
}

// out = x^T for x [s0, s1] (out [s1, s0]): tiles of kTransposeTileRows rows at the example,
// partial or absent tiles elsewhere, the tile count computed per call.
TEST(SizeGenericCodegen, TransposesByTilesAtAnySize) {
  constexpr int64_t kA = 40, kB = 48;
  Kernel k = make_kernel("transpose", {kB, kA}, 0, {F32}, {F32});
  KernelBuilder b(k);
  const int x = b.load(0, {1, kB});
  b.store(1, {kA, 1}, b.unary(Op::Neg, x, F32));
  k.size_inputs = {kA, kB};
  k.size_terms = {s(1), s(0)};
  k.exprs[x].map.stride_terms = {std::nullopt, s(1)};
  k.stores[0].map.stride_terms = {s(0), std::nullopt};
  const CpuSchedule schedule =
      schedule_cpu_kernel(kernel::collapse_dims(k), code_variant(CodegenOptions{}).target);
  EXPECT_EQ(schedule.strategy, CpuSchedule::Strategy::Transpose);
  check_bindings(k, {{40, 48}, {1, 1}, {0, 20}, {5, 3}, {16, 16}, {17, 33}, {3, 100}, {100, 5}},
                 uniform(-5, 5));
}

// A fusion group as the pipeline lowers it (layer norm then gelu over [batch, tokens, 48]),
// lowered at three bindings and generalized (passes/kernel/generalize.h): one code for every
// batch and token count.
TEST(SizeGenericCodegen, ALoweredGroupGeneralizedFromThreeBindingsRunsAtAnyOther) {
  auto lowered = [](const Binding& b) {
    const std::string shape = "f32[" + std::to_string(b[0]) + "," + std::to_string(b[1]) + ",48]";
    const auto body = ir::parse_graph("graph(%x : " + shape +
                                      ", %w : f32[48], %b : f32[48]):\n"
                                      "  %y : " +
                                      shape +
                                      " = aten::layer_norm(%x, %w, %b) {normalized_shape=[48], "
                                      "eps=1e-05, cudnn_enable=true}\n"
                                      "  %g : " +
                                      shape +
                                      " = aten::gelu(%y) {approximate=\"tanh\"}\n"
                                      "  return (%g)\n");
    return kernel::lower_group(*body, "layer_norm_gelu");
  };
  const kernel::Bindings bindings = {{2, 8}, {3, 8}, {2, 9}};
  std::vector<Kernel> kernels;
  for (const Binding& b : bindings)
    kernels.push_back(lowered(b));
  const kernel::Generalized g = kernel::generalize(kernels, bindings);
  ASSERT_TRUE(g.kernel) << g.why_not;
  // The normalized values feed tanh's polynomial: a few ulp of the output on top of the
  // statistics' bound (layer_norm_case's, rows of 48 from U(-3, 3)).
  check_bindings(*g.kernel, {{2, 8}, {1, 1}, {0, 4}, {5, 13}, {2, 129}, {17, 3}}, uniform(-3, 3),
                 [](int bits, const Binding&) {
                   return Tolerance{8, 32 * kU32, 10 * sum_error(bits, 48, 48 * 3.0) / 48};
                 });
}

TEST(SizeGenericCodegen, TheLaunchFollowsTheSizeInputs) {
  const Kernel k = bias_kernel(6, 40);
  const CompiledKernels compiled = compile_kernels({k}, CodegenOptions{});
  const CompiledKernel& fn = compiled.kernels.at(0);
  ASSERT_TRUE(fn.launch_at);
  EXPECT_EQ(fn.range, 6 * 40);  // the example binding's
  for (Binding sizes : {Binding{1, 1}, Binding{0, 7}, Binding{1000, 513}}) {
    const KernelLaunch at = fn.launch_at(sizes.data());
    EXPECT_EQ(at, choose_launch(kernel::collapse_dims(kernel::bind_sizes(k, sizes))));
  }
}

TEST(SizeGenericCodegen, KernelsThatDifferOnlyInTheirExampleShareCode) {
  CodegenOptions options;
  const CompiledKernels first = compile_kernels({bias_kernel(6, 40)}, options);
  // Another example, the same schedule: the kernel cache hands back the first code.
  const CompiledKernels second = compile_kernels({bias_kernel(9, 41)}, options);
  EXPECT_EQ(second.reused, 1);
  EXPECT_EQ(second.kernels.at(0).function, first.kernels.at(0).function);
  // A constant kernel of the example's sizes is other code: it reads no size inputs.
  const Kernel plain = kernel::without_terms(bias_kernel(6, 40));
  const CompiledKernels constant = compile_kernels({plain}, options);
  EXPECT_NE(constant.kernels.at(0).function, first.kernels.at(0).function);
  EXPECT_FALSE(constant.kernels.at(0).launch_at);
}

TEST(SizeGenericCodegen, AnExampleBindingBelowTwoIsRefused) {
  // A term of 1 at the example would read as a contiguous stride there and be emitted as one.
  try {
    compile_kernels({bias_kernel(6, 1)}, CodegenOptions{});
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("size input s1 = 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::codegen
