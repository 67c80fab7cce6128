// The generated CUDA C run on the CPU (cuda_emulation.h: every thread of a block an OS thread)
// and compared with the kernel IR's reference interpreter on the same inputs, including NaN, inf
// and signed zeros. No GPU needed; scripts/gpu-check runs the same code on a real one.
//
// Tolerances: integers and bools exact; float results of +, -, *, /, casts, max/min, where:
// exact; exp/log/tanh/erf/sigmoid/pow (the host's float math against the interpreter's double
// math): 2 ulp of the result's format; sums: |got - want| <= 2 n u max|x| (n elements per row, u
// the unit roundoff), which any summation order meets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cuda/cuda_emulation.h"
#include "cuda/test_kernels.h"
#include "passes/kernel/collapse_dims.h"
#include "passes/kernel/interpreter.h"
#include "passes/kernel/printer.h"
#include "passes/kernel/scalar_convert.h"

namespace kiln::cuda_test {
namespace {

using namespace kernels;
using Bytes = std::vector<uint8_t>;

int64_t elements(const Kernel& k, int buffer) {
  int64_t extent = 0;
  auto reach = [&](const kernel::IndexMap& m) {
    if (m.buffer != buffer) return;
    int64_t last = m.offset;
    for (int d = 0; d < k.rank(); ++d)
      last += std::max<int64_t>(k.sizes[d] - 1, 0) * m.strides[d];
    extent = std::max(extent, last + 1);
  };
  for (const auto& e : k.exprs)
    if (e.op == Op::Load) reach(e.map);
  for (const auto& s : k.stores)
    reach(s.map);
  return extent;
}

double read(DType t, const uint8_t* p) {
  auto get = [&](auto sample) {
    std::memcpy(&sample, p, sizeof sample);
    return static_cast<double>(sample);
  };
  switch (t) {
    case DType::Float32: return get(float{});
    case DType::Float64: return get(double{});
    case DType::Float16: return kernel::float_from_half(static_cast<uint16_t>(get(uint16_t{})));
    case DType::BFloat16:
      return kernel::float_from_bfloat16(static_cast<uint16_t>(get(uint16_t{})));
    case DType::Int64: return get(int64_t{});
    case DType::Int32: return get(int32_t{});
    case DType::Int16: return get(int16_t{});
    case DType::Int8: return get(int8_t{});
    default: return get(uint8_t{});  // uint8, bool
  }
}

void write(DType t, uint8_t* p, double v) {
  auto put = [&](auto sample) { std::memcpy(p, &sample, sizeof sample); };
  switch (t) {
    case DType::Float32: put(static_cast<float>(v)); break;
    case DType::Float64: put(v); break;
    case DType::Float16: put(kernel::half_from_float(static_cast<float>(v))); break;
    case DType::BFloat16: put(kernel::bfloat16_from_float(static_cast<float>(v))); break;
    case DType::Int64: put(static_cast<int64_t>(v)); break;
    case DType::Int32: put(static_cast<int32_t>(v)); break;
    case DType::Int16: put(static_cast<int16_t>(v)); break;
    case DType::Int8: put(static_cast<int8_t>(v)); break;
    case DType::Bool: put(static_cast<uint8_t>(v != 0)); break;
    default: put(static_cast<uint8_t>(v)); break;
  }
}

/// Random values of the buffer's dtype; float buffers get some NaN, inf and -0 too.
Bytes fill(DType t, int64_t n, std::mt19937_64& rng) {
  Bytes bytes(n * ir::dtype_size(t));
  std::uniform_real_distribution<double> real(-3, 3);
  std::uniform_int_distribution<int> integer(t == DType::UInt8 ? 0 : -60, 60);
  const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0};
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (t == DType::Bool) {
      v = integer(rng) & 1;
    } else if (!ir::is_floating(t)) {
      v = integer(rng);
    } else {
      v = i % 97 < 6 && n > 97 ? specials[i % 97] : real(rng);
    }
    write(t, bytes.data() + i * ir::dtype_size(t), v);
  }
  return bytes;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::Float64: return 0x1p-53;
    case DType::Float16: return 0x1p-11;
    case DType::BFloat16: return 0x1p-8;
    default: return 0x1p-24;
  }
}

bool uses_math(const Kernel& k) {
  for (const auto& e : k.exprs) {
    switch (e.op) {
      case Op::Exp: case Op::Log: case Op::Tanh: case Op::Erf: case Op::Sigmoid: case Op::Pow:
      case Op::Sqrt: case Op::Rsqrt: return true;
      default: break;
    }
  }
  return false;
}

/// Runs every kernel emulated and interpreted on the same inputs; returns the differences.
std::string differences(const std::vector<Kernel>& kernels) {
  std::mt19937_64 rng(7);
  const auto module = codegen::cuda::emit_cuda_module(kernels);
  EmulatedModule emulated(module);
  std::string report;
  for (size_t index = 0; index < kernels.size(); ++index) {
    const Kernel& k = kernels[index];
    std::vector<Bytes> want, got;
    double max_input = 0;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      const DType t = k.buffers[b].dtype;
      const int64_t n = elements(k, static_cast<int>(b));
      want.push_back(k.buffers[b].is_output ? Bytes(n * ir::dtype_size(t), 0xAB) : fill(t, n, rng));
      got.push_back(want.back());
      if (!k.buffers[b].is_output) {
        for (int64_t i = 0; i < n; ++i) {
          const double v = read(t, want.back().data() + i * ir::dtype_size(t));
          if (std::isfinite(v)) max_input = std::max(max_input, std::fabs(v));
        }
      }
    }
    std::vector<void*> want_pointers, got_pointers;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      want_pointers.push_back(want[b].data());
      got_pointers.push_back(got[b].data());
    }
    kernel::interpret(k, want_pointers);
    // Two blocks: every grid-stride loop goes round more than once.
    emulated.launch(static_cast<int>(index), got_pointers, 2);
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      if (!k.buffers[b].is_output) continue;
      const DType t = k.buffers[b].dtype;
      const int64_t size = ir::dtype_size(t);
      const double u = unit_roundoff(t);
      const double row = k.reduce_rank ? static_cast<double>(k.row_size()) : 0;
      for (int64_t i = 0; i < static_cast<int64_t>(want[b].size()) / size; ++i) {
        const double w = read(t, want[b].data() + i * size);
        const double g = read(t, got[b].data() + i * size);
        bool same = w == g || (std::isnan(w) && std::isnan(g));
        if (!same && ir::is_floating(t) && std::isfinite(w) && std::isfinite(g)) {
          double tolerance = uses_math(k) ? 4 * u * std::fabs(w) + 1e-300 : 0;
          if (row > 0) tolerance += 2 * row * 0x1p-24 * std::max(max_input, 1.0) * std::max(1.0, std::fabs(w));
          same = std::fabs(w - g) <= tolerance;
        }
        if (!same) {
          report += "kernel " + std::to_string(index) + " buffer b" + std::to_string(b) +
                    " element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                    std::to_string(w) + "\n" + kernel::print_kernel(k);
          break;
        }
      }
    }
  }
  return report;
}

TEST(CudaEmulation, GeneratedKernelsComputeWhatTheInterpreterDoes) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<Kernel> kernels;
  for (Kernel& k : test_kernels()) {
    // The long rows stay (split reductions); the rest is shrunk only where huge.
    kernels.push_back(std::move(k));
  }
  EXPECT_EQ(differences(kernels), "");
}

TEST(CudaEmulation, InPlaceKernelReadsBeforeItWrites) {
  if (const std::string why = emulation_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // out = x * y + x over [64, 256]: exact arithmetic, so the bytes must match.
  Kernel k = make({64, 256}, 0, {DType::Float32, DType::Float32}, {DType::Float32});
  KernelBuilder b(k);
  const int x0 = b.load(0, {256, 1}), y0 = b.load(1, {256, 1});
  b.store(2, {256, 1},
          b.binary(Op::Add, b.binary(Op::Mul, x0, y0, DType::Float32), x0, DType::Float32));
  std::mt19937_64 rng(3);
  Bytes x = fill(DType::Float32, 64 * 256, rng), y = fill(DType::Float32, 64 * 256, rng);
  Bytes want(x.size());
  kernel::interpret(k, {x.data(), y.data(), want.data()});
  k.in_place = {{0, 2}};
  EmulatedModule emulated(codegen::cuda::emit_cuda_module({k}));
  emulated.launch(0, {x.data(), y.data(), x.data()}, 3);  // the output over x
  EXPECT_EQ(std::memcmp(x.data(), want.data(), want.size()), 0);
}

}  // namespace
}  // namespace kiln::cuda_test
