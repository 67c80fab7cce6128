#include "backend/codegen/cuda/cuda_prelude.h"

namespace kiln::codegen::cuda {

// Rounding to float16/bfloat16 is to nearest even, as the reference interpreter does (a quiet
// NaN stays NaN). The block reduction needs blockDim.x to be a multiple of 32 (every lane of
// every warp takes part in the shuffles) and leaves the result in every thread; partials are
// combined in warp order, so a launch always gives the same bits.
const char* const kCudaPrelude = R"CUDA(
#define KILN_INF __int_as_float(0x7f800000)
#define KILN_NAN __int_as_float(0x7fc00000)
#define KILN_DINF __longlong_as_double(0x7ff0000000000000LL)
#define KILN_DNAN __longlong_as_double(0x7ff8000000000000LL)

#ifndef KILN_HOST_EMULATION  // the tests' CPU emulation brings its own (no PTX on the host)
__device__ __forceinline__ float kiln_from_half(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short kiln_to_half(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif
__device__ __forceinline__ float kiln_from_bf16(unsigned short b) {
  return __uint_as_float(static_cast<unsigned int>(b) << 16);
}
__device__ __forceinline__ unsigned short kiln_to_bf16(float f) {
  const unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// Float -> integer as eager converts on x86 (kernel::integer_from_float): NaN, infinities and
// values out of range give the most negative value; a float argument widens to double exactly.
__device__ __forceinline__ int kiln_to_int32(double x) {
  return x >= -2147483648.0 && x < 2147483648.0 ? static_cast<int>(x) : (-2147483647 - 1);
}
__device__ __forceinline__ long long kiln_to_int64(double x) {
  return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? static_cast<long long>(x)
                                                                   : (-9223372036854775807LL - 1);
}
__device__ __forceinline__ float kiln_round_half(float x) { return kiln_from_half(kiln_to_half(x)); }
__device__ __forceinline__ float kiln_round_bf16(float x) { return kiln_from_bf16(kiln_to_bf16(x)); }

#ifndef KILN_HOST_EMULATION
__device__ __forceinline__ float kiln_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double kiln_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float kiln_rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double kiln_rsqrt(double x) { return 1.0 / sqrt(x); }
#endif

// torch.maximum/minimum: NaN if either is NaN.
__device__ __forceinline__ float kiln_fmax(float a, float b) {
  return (a != a || b != b) ? KILN_NAN : fmaxf(a, b);
}
__device__ __forceinline__ float kiln_fmin(float a, float b) {
  return (a != a || b != b) ? KILN_NAN : fminf(a, b);
}
__device__ __forceinline__ double kiln_fmax(double a, double b) {
  return (a != a || b != b) ? KILN_DNAN : fmax(a, b);
}
__device__ __forceinline__ double kiln_fmin(double a, double b) {
  return (a != a || b != b) ? KILN_DNAN : fmin(a, b);
}

struct kiln_sum {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ double operator()(double a, double b) const { return a + b; }
  __device__ long long operator()(long long a, long long b) const {
    return static_cast<long long>(static_cast<unsigned long long>(a) +
                                  static_cast<unsigned long long>(b));
  }
};
struct kiln_max {
  __device__ float operator()(float a, float b) const { return kiln_fmax(a, b); }
  __device__ double operator()(double a, double b) const { return kiln_fmax(a, b); }
  __device__ long long operator()(long long a, long long b) const { return a > b ? a : b; }
};
struct kiln_min {
  __device__ float operator()(float a, float b) const { return kiln_fmin(a, b); }
  __device__ double operator()(double a, double b) const { return kiln_fmin(a, b); }
  __device__ long long operator()(long long a, long long b) const { return a < b ? a : b; }
};

// Every thread's value combined over the block; `shared` holds 32 values of T.
template <typename T, typename F>
__device__ __forceinline__ T kiln_block_reduce(T value, F f, T* shared) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = f(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warps = (blockDim.x + 31) >> 5;
  __syncthreads();  // the previous reduction's partials have been read
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = value;
  __syncthreads();
  value = shared[0];
  for (int w = 1; w < warps; ++w) value = f(value, shared[w]);
  return value;
}
)CUDA";

}  // namespace kiln::codegen::cuda
