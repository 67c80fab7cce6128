// The CUDA C printer (kernel IR -> CUDA C), checked with CHECK: patterns, and every kernel here
// compiled by NVRTC for sm_80 and sm_90 and accepted by ptxas (no GPU needed).
#include <gtest/gtest.h>

#include "backend/codegen/cuda/compile_cuda_kernels.h"
#include "backend/codegen/cuda/cuda_emitter.h"
#include "cuda/cuda_test_support.h"
#include "cuda/test_kernels.h"
#include "kiln/error.h"
#include "passes/kernel/collapse_dims.h"
#include "runtime/cuda/driver.h"
#include "tests/support/check_pattern.h"

namespace kiln::codegen::cuda {
namespace {

using kernel::DType;
using kernel::Kernel;
using kernel::KernelBuilder;
using kernel::Op;
using kernel::ReduceKind;
using namespace cuda_test::kernels;

std::string source_of(const Kernel& k) {
  const Kernel c = kernel::collapse_dims(k);
  return emit_cuda_kernel(c, choose_cuda_schedule(c), "k");
}

TEST(CudaEmitter, ElementwiseKernelIsAGridStrideLoopWithA16ByteAccessPath) {
  const std::string text = source_of(exp_mul({256, 1}));
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: extern "C" __global__ void __launch_bounds__(256)
    CHECK: k(const float* __restrict__ b0, const float* __restrict__ b1, float* __restrict__ b2)
    CHECK: if (!((reinterpret_cast<unsigned long long>(b0) % 16)
    CHECK: for (int g = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x; g < 4096;
    CHECK: *reinterpret_cast<uint4*>(l0) = *reinterpret_cast<const uint4*>(b0 + (0 + c0 * 1))
    CHECK: #pragma unroll
    CHECK: expf(v0)
    CHECK: *reinterpret_cast<uint4*>(b2 + (0 + c0 * 1)) = *reinterpret_cast<const uint4*>(s0)
    CHECK: return;
    CHECK: for (int i = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x; i < 16384;
    CHECK: b2[(0 + c0 * 1)] = v3;
  )")) << text;
}

TEST(CudaEmitter, RowBroadcastInputIsReadOncePerLane) {
  // y is a [256] row broadcast over 64 rows: contiguous along the inner dim, so still 16 bytes.
  const std::string text = source_of(exp_mul({0, 1}));
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: *reinterpret_cast<uint4*>(l1) = *reinterpret_cast<const uint4*>(b1 + (0 + c1 * 1))
  )")) << text;
  // A column broadcast (stride 0 inside the row) is read directly in each lane.
  const std::string column = source_of(exp_mul({1, 0}));
  EXPECT_TRUE(matches_checks(column, R"(
    CHECK: #pragma unroll
    CHECK: const float v1 = b1[(0 + c0 * 1)];
  )")) << column;
}

TEST(CudaEmitter, TransposedInputHasNoVectorPath) {
  Kernel k = exp_mul({1, 64});
  k.sizes = {64, 64};
  k.exprs[0].map.strides = k.stores[0].map.strides = {64, 1};
  const std::string text = source_of(k);
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK-NOT: uint4
    CHECK: for (int i =
    CHECK: rem % 64
  )")) << text;
}

TEST(CudaEmitter, HalfPrecisionLoadsAndStoresConvertAndArithmeticRounds) {
  const std::string text = source_of(exp_mul({256, 1}, DType::Float16));
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: const unsigned short* __restrict__ b0
    CHECK: unsigned short l0[8];
    CHECK: kiln_from_half(l0[lane])
    CHECK: kiln_round_half(expf(v0))
    CHECK: s0[lane] = kiln_to_half(v3)
  )")) << text;
}

TEST(CudaEmitter, SoftmaxIsOneBlockPerRowWithTwoBlockReductions) {
  const std::string text = source_of(softmax(128, 1000));
  // 1000 elements over 256 threads: each keeps its 4 in registers, so x is read once.
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: __launch_bounds__(256)
    CHECK: __shared__ long long kiln_shared[32];
    CHECK: for (int item = blockIdx.x; item < 128; item += gridDim.x)
    CHECK: float r0[4];
    CHECK: float acc = -KILN_INF;
    CHECK: for (int j = 0; j < 4; ++j) {
    CHECK: const int e = threadIdx.x + j * blockDim.x;
    CHECK: if (e < 1000) {
    CHECK: const float v0 = b0[
    CHECK: r0[j] = v0;
    CHECK: acc = kiln_max()(acc, static_cast<float>(v0));
    CHECK: kiln_block_reduce(acc, kiln_max()
    CHECK: float acc = 0.0f;
    CHECK-NOT: b0[
    CHECK: const float v0 = r0[j];
    CHECK: kiln_block_reduce(acc, kiln_sum()
    CHECK-NOT: b0[
    CHECK: (v3 / v4)
    CHECK-NOT: atomicAdd
  )")) << text;
  // Rows longer than 8 elements per thread are walked from memory each time.
  const std::string long_rows = source_of(softmax(16, 4096));
  EXPECT_TRUE(matches_checks(long_rows, R"(
    CHECK-NOT: r0[
    CHECK: for (int e = threadIdx.x; e < 4096; e += blockDim.x)
  )")) << long_rows;
}

TEST(CudaEmitter, ShortRowsGetSmallerBlocks) {
  const Kernel c = kernel::collapse_dims(row_sum(4096, 40));
  EXPECT_EQ(choose_cuda_schedule(c).block, 64);
  EXPECT_EQ(choose_cuda_schedule(c).blocks, 4096);
}

TEST(CudaEmitter, LongRowsWithFewRowsSplitAcrossBlocks) {
  const Kernel c = kernel::collapse_dims(row_sum(2, 1 << 20, ReduceKind::Max));
  const CudaSchedule s = choose_cuda_schedule(c);
  EXPECT_EQ(s.slices, (1 << 20) / kSplitSliceElements);
  EXPECT_EQ(s.blocks, 2 * s.slices);
  EXPECT_EQ(s.workspace_bytes, 2 * s.slices * 8 + 2 * 4);
  const std::string text = emit_cuda_kernel(c, s, "k");
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: unsigned char* __restrict__ workspace
    CHECK: const int row = item / 64;
    CHECK: const int slice = item % 64;
    CHECK: for (int e = slice * 16384 + threadIdx.x; e < min(static_cast<int>(1048576), (slice + 1) * 16384)
    CHECK: __threadfence();
    CHECK: atomicAdd(&counters[row], 1u) == 64 - 1
    CHECK: if (!kiln_last) continue;
    CHECK: counters[row] = 0;
    CHECK: if (threadIdx.x == 0) b1[
  )")) << text;
  EXPECT_EQ(s.phases, 1);  // one walk: one launch
}

TEST(CudaEmitter, LongSoftmaxRowsSplitIntoOneLaunchPerWalk) {
  // max, sum, then the stores: three launches over the same slices; the first two leave the
  // row's combined max and sum in the workspace, the last stores every slice.
  const Kernel c = kernel::collapse_dims(softmax(2, 1 << 20));
  const CudaSchedule s = choose_cuda_schedule(c);
  EXPECT_EQ(s.slices, (1 << 20) / kSplitSliceElements);
  EXPECT_EQ(s.phases, 3);
  EXPECT_EQ(s.workspace_bytes, 2 * s.slices * 8 + 2 * 2 * 8 + 2 * 4);
  const std::string text = emit_cuda_kernel(c, s, "k");
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: __device__ __forceinline__ void k_body(
    CHECK: unsigned char* __restrict__ workspace, const int phase)
    CHECK: if (phase == 0) {
    CHECK: for (int e = slice * 16384 + threadIdx.x;
    CHECK: if (!kiln_last) continue;
    CHECK: if (threadIdx.x == 0) reinterpret_cast<float*>(workspace + 1024)[row * 2 + 0] = acc;
    CHECK: continue;
    CHECK: } else {
    CHECK: acc = reinterpret_cast<float*>(workspace + 1024)[row * 2 + 0];
    CHECK: if (phase == 1) {
    CHECK: atomicAdd(&counters[row], 1u) == 64 - 1
    CHECK: reinterpret_cast<float*>(workspace + 1024)[row * 2 + 1] = acc;
    CHECK: for (int e = slice * 16384 + threadIdx.x;
    CHECK: b1[
    CHECK: extern "C" __global__ void __launch_bounds__(256)
    CHECK: k(
    CHECK: k_body(b0, b1, workspace, 0);
    CHECK: k_phase1(
    CHECK: k_body(b0, b1, workspace, 1);
    CHECK: k_phase2(
    CHECK: k_body(b0, b1, workspace, 2);
  )")) << text;
  // Short rows, or many of them: one block per row, one launch.
  EXPECT_EQ(choose_cuda_schedule(kernel::collapse_dims(softmax(2, 4096))).phases, 1);
  EXPECT_EQ(choose_cuda_schedule(kernel::collapse_dims(softmax(128, 1 << 17))).phases, 1);
}

TEST(CudaEmitter, ColumnReductionsGiveNeighbouringRowsToNeighbouringLanes) {
  // x.sum(0) of a [64, 4096] x: lane l of every warp takes column l of a 32-column tile, so a
  // warp reads 32 neighbouring floats per step; the 8 warps split the 64 elements.
  const Kernel c = kernel::collapse_dims(column_sum(4096, 64));
  const CudaSchedule s = choose_cuda_schedule(c);
  EXPECT_TRUE(s.across_rows);
  EXPECT_EQ(s.blocks, 4096 / kTileRows);
  EXPECT_EQ(s.slices, 1);
  const std::string text = emit_cuda_kernel(c, s, "k");
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: __shared__ long long kiln_tile[256];
    CHECK: const int lane = threadIdx.x % 32;
    CHECK: for (int tile = blockIdx.x; tile < 128; tile += gridDim.x)
    CHECK: const int row = active ? tile * 32 + lane : 4096 - 1;
    CHECK: for (int e = group; e < 64; e += 8)
    CHECK: b0[(0 + c0 * 1 + c1 * 4096)]
    CHECK: acc = reinterpret_cast<float*>(kiln_tile)[lane];
    CHECK: if (active && group == 0) b1[
  )")) << text;
  // Fewer columns: one block per column, as before; row-major rows: along the rows.
  EXPECT_FALSE(choose_cuda_schedule(kernel::collapse_dims(column_sum(1024, 64))).across_rows);
  EXPECT_FALSE(choose_cuda_schedule(kernel::collapse_dims(row_sum(8192, 64))).across_rows);
}

TEST(CudaEmitter, InPlacePairLosesRestrict) {
  Kernel k = exp_mul({256, 1});
  k.in_place = {{0, 2}};
  const std::string text = source_of(k);
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: k(const float* b0, const float* __restrict__ b1, float* b2)
  )")) << text;
}

TEST(CudaEmitter, IntegerArithmeticWrapsAndDivisionByZeroGivesZero) {
  Kernel k = make_kernel("k", {1000}, 0, {DType::Int32, DType::Int32}, {DType::Int32});
  KernelBuilder b(k);
  const int x = b.load(0, {1}), y = b.load(1, {1});
  b.store(2, {1}, b.binary(Op::Div, b.binary(Op::Add, x, y, DType::Int32), y, DType::Int32));
  const std::string text = source_of(k);
  EXPECT_TRUE(matches_checks(text, R"(
    CHECK: static_cast<int>(static_cast<unsigned long long>(v0) + static_cast<unsigned long long>(v1))
    CHECK: (v1 == 0 ? static_cast<int>(0) : static_cast<int>(v2 / v1))
  )")) << text;
}

TEST(CudaEmitter, LargeTensorsIndexWith64Bits) {
  Kernel k = make_kernel("k", {int64_t{3} << 30}, 0, {DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  b.store(1, {1}, b.unary(Op::Neg, b.load(0, {1}), DType::Float32));
  const std::string text = source_of(k);
  EXPECT_TRUE(matches_checks(text, "CHECK: for (long long g = static_cast<long long>(blockIdx.x)"))
      << text;
}

TEST(CudaEmitter, EveryKernelCompilesForSm80AndSm90) {
  const CudaModuleSource module = emit_cuda_module(test_kernels());
  EXPECT_GT(module.kernels.size(), 200u);
  cuda_test::expect_compiles_for_all_architectures(module.source, "test_kernels");
}

TEST(CudaEmitter, NvrtcErrorsCarryTheLog) {
  if (!kiln::cuda::nvrtc_unavailable_reason().empty()) GTEST_SKIP() << "no NVRTC here";
  try {
    kiln::cuda::nvrtc_compile("extern \"C\" __global__ void f() { undefined_thing(); }", 90, "bad");
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Backend);
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos) << e.what();
  }
}

TEST(CudaEmitter, CompilesAreCachedPerSourceAndArchitecture) {
  if (!kiln::cuda::nvrtc_unavailable_reason().empty()) GTEST_SKIP() << "no NVRTC here";
  const std::string source = emit_cuda_module({softmax(4, 64)}).source;
  const int before = kiln::cuda::nvrtc_cache_misses();
  auto first = kiln::cuda::nvrtc_compile_cached(source, 80, "cached");
  auto again = kiln::cuda::nvrtc_compile_cached(source, 80, "cached");
  auto other = kiln::cuda::nvrtc_compile_cached(source, 90, "cached");
  EXPECT_EQ(first.get(), again.get());
  EXPECT_NE(first.get(), other.get());
  EXPECT_EQ(kiln::cuda::nvrtc_cache_misses() - before, 2);
}

TEST(CudaEmitter, WithoutAGpuCompilingForCudaSaysWhy) {
  const std::string why = cuda_codegen_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "this machine can run CUDA kernels";
  try {
    compile_cuda_kernels({softmax(4, 64)}, {});
    FAIL() << "compiled without CUDA";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("CUDA code generation is unavailable: " + why),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::codegen::cuda
