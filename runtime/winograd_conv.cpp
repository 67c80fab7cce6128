#include "runtime/winograd_conv.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "runtime/parallel.h"

namespace kiln {
namespace {

constexpr int64_t kOut = 4;                  // output tile side
constexpr int64_t kIn = kOut + 3 - 1;        // input tile side
constexpr int64_t kPoints = kIn * kIn;       // GEMMs, one per transformed point
constexpr int64_t kWorkPerThread = 1 << 16;  // floats per run_parallel grain

// The transforms are short sums of channel vectors. libkiln is built for baseline x86-64, so they
// are compiled once per vector width and the loader picks the CPU's (GCC function clones). Not
// under ThreadSanitizer: the loader runs the clones' resolver before TSan's runtime is set up,
// and the instrumented resolver crashes the program at start.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KILN_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KILN_VECTOR_CLONES
#endif

// 16 channels: one AVX-512 register, two AVX2 ones. Written as a vector type rather than a loop
// so every clone is vector code whatever the compiler's cost model says.
using Lanes = float __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline __attribute__((always_inline)) Lanes load(const float* p, int64_t n) {
  Lanes v{};
  if (n == kLanes) {
    std::memcpy(&v, p, sizeof v);  // one vector load
  } else {
    std::memcpy(&v, p, n * sizeof(float));
  }
  return v;
}

inline __attribute__((always_inline)) void store(float* p, Lanes v, int64_t n) {
  if (n == kLanes) {
    std::memcpy(p, &v, sizeof v);
  } else {
    std::memcpy(p, &v, n * sizeof(float));
  }
}

// B^T d for six vectors. B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0;
//                               0 2 -1 -2 1 0; 0 4 0 -5 0 1].
inline __attribute__((always_inline)) void input_1d(const Lanes (&d)[kIn], Lanes (&o)[kIn]) {
  o[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
  o[1] = d[3] + d[4] - 4.0f * (d[1] + d[2]);
  o[2] = 4.0f * (d[1] - d[2]) + d[4] - d[3];
  o[3] = 2.0f * (d[3] - d[1]) + d[4] - d[2];
  o[4] = 2.0f * (d[1] - d[3]) + d[4] - d[2];
  o[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
}

// A^T m for six vectors. A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1].
inline __attribute__((always_inline)) void output_1d(const Lanes (&m)[kIn], Lanes (&o)[kOut]) {
  const Lanes p12 = m[1] + m[2], n12 = m[1] - m[2], p34 = m[3] + m[4], n34 = m[3] - m[4];
  o[0] = m[0] + p12 + p34;
  o[1] = n12 + 2.0f * n34;
  o[2] = p12 + 4.0f * p34;
  o[3] = n12 + 8.0f * n34 + m[5];
}

/// Sizes of one call: input [N, H, W, C] (channels-last memory), output [N, H, W, K].
struct Shape {
  int64_t n, h, w, c, k, tiles_h, tiles_w;
  int64_t tiles() const { return n * tiles_h * tiles_w; }
};

/// Tiles [begin, end) of the NHWC input into V [36, tiles, C]; outside the image reads zeros
/// (the padding of 1). Returns false if it read a NaN or an infinity: the transforms would
/// spread it over whole tiles, where a direct convolution keeps it to the 3x3 windows over it.
KILN_VECTOR_CLONES
bool transform_input(const float* x, const Shape& s, int64_t begin, int64_t end, float* v) {
  const int64_t plane = s.tiles() * s.c;
  Lanes finite{};  // d - d is 0 for finite d, NaN otherwise; one subtract and add per load
  for (int64_t tile = begin; tile < end; ++tile) {
    const int64_t n = tile / (s.tiles_h * s.tiles_w), within = tile % (s.tiles_h * s.tiles_w);
    const int64_t y0 = within / s.tiles_w * kOut - 1, x0 = within % s.tiles_w * kOut - 1;
    for (int64_t c0 = 0; c0 < s.c; c0 += kLanes) {
      const int64_t lanes = std::min(kLanes, s.c - c0);
      Lanes columns[kIn][kIn];  // [q][r]: column q of the tile, transformed down its rows
      for (int64_t q = 0; q < kIn; ++q) {
        Lanes d[kIn];
        const int64_t xx = x0 + q;
        for (int64_t r = 0; r < kIn; ++r) {
          const int64_t y = y0 + r;
          const bool inside = y >= 0 && y < s.h && xx >= 0 && xx < s.w;
          d[r] = inside ? load(x + ((n * s.h + y) * s.w + xx) * s.c + c0, lanes) : Lanes{};
          finite += d[r] - d[r];
        }
        input_1d(d, columns[q]);
      }
      float* out = v + tile * s.c + c0;
      for (int64_t a = 0; a < kIn; ++a) {
        Lanes row[kIn], o[kIn];
        for (int64_t q = 0; q < kIn; ++q)
          row[q] = columns[q][a];
        input_1d(row, o);
        for (int64_t b = 0; b < kIn; ++b)
          store(out + (a * kIn + b) * plane, o[b], lanes);
      }
    }
  }
  for (int64_t lane = 0; lane < kLanes; ++lane)
    if (finite[lane] != 0.0f) return false;
  return true;
}

/// Tiles [begin, end) of M [36, tiles, K] to the NHWC output, with the bias, the residual
/// `other` (NHWC, may be null) and the relu; rows and columns past the image are dropped.
KILN_VECTOR_CLONES
void transform_output(const float* m, const Shape& s, const float* bias, const float* other,
                      bool relu, int64_t begin, int64_t end, float* y) {
  const int64_t plane = s.tiles() * s.k;
  for (int64_t tile = begin; tile < end; ++tile) {
    const int64_t n = tile / (s.tiles_h * s.tiles_w), within = tile % (s.tiles_h * s.tiles_w);
    const int64_t y0 = within / s.tiles_w * kOut, x0 = within % s.tiles_w * kOut;
    for (int64_t k0 = 0; k0 < s.k; k0 += kLanes) {
      const int64_t lanes = std::min(kLanes, s.k - k0);
      const float* in = m + tile * s.k + k0;
      Lanes columns[kIn][kOut];  // [b][i]: column b of the 6x6 point tile, reduced to 4 rows
      for (int64_t b = 0; b < kIn; ++b) {
        Lanes column[kIn];
        for (int64_t a = 0; a < kIn; ++a)
          column[a] = load(in + (a * kIn + b) * plane, lanes);
        output_1d(column, columns[b]);
      }
      const Lanes shift = bias ? load(bias + k0, lanes) : Lanes{};
      for (int64_t i = 0; i < kOut && y0 + i < s.h; ++i) {
        Lanes row[kIn], o[kOut];
        for (int64_t b = 0; b < kIn; ++b)
          row[b] = columns[b][i];
        output_1d(row, o);
        for (int64_t j = 0; j < kOut && x0 + j < s.w; ++j) {
          const int64_t at = ((n * s.h + y0 + i) * s.w + x0 + j) * s.k + k0;
          Lanes value = o[j] + shift;
          if (other) value += load(other + at, lanes);
          // relu as aten::relu: NaN stays NaN (the comparison is false for it).
          if (relu) value = value < 0.0f ? Lanes{} : value;
          store(y + at, value, lanes);
        }
      }
    }
  }
}

int64_t grain(int64_t floats_per_tile) {
  return std::max<int64_t>(1, kWorkPerThread / std::max<int64_t>(1, floats_per_tile));
}

void check_arguments(const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& transformed, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& other, std::string_view activation) {
  TORCH_CHECK(input.dim() == 4 && input.scalar_type() == at::kFloat && input.device().is_cpu() &&
                  input.layout() == at::kStrided,
              "kiln::winograd_conv2d: input must be a 4-D float32 CPU tensor, got ", input.sizes(),
              " ", input.scalar_type(), " on ", input.device());
  TORCH_CHECK(weight.dim() == 4 && weight.size(1) == input.size(1) && weight.size(2) == 3 &&
                  weight.size(3) == 3 && weight.scalar_type() == at::kFloat,
              "kiln::winograd_conv2d: weight must be a float32 [K, C, 3, 3] filter with C = ",
              input.size(1), " (the input's channels), got ", weight.sizes(), " ",
              weight.scalar_type());
  const int64_t k = weight.size(0);
  TORCH_CHECK(transformed.dim() == 3 && transformed.size(0) == kPoints &&
                  transformed.size(1) == input.size(1) && transformed.size(2) == k &&
                  transformed.scalar_type() == at::kFloat && transformed.device().is_cpu(),
              "kiln::winograd_conv2d: transformed must be kiln::winograd_weight(weight), a "
              "float32 [36, ",
              input.size(1), ", ", k, "] tensor, got ", transformed.sizes(), " ",
              transformed.scalar_type());
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == k &&
                        bias->scalar_type() == at::kFloat && bias->device().is_cpu()),
              "kiln::winograd_conv2d: bias must be a float32 CPU vector of ", k,
              " elements (the output channels)");
  const std::vector<int64_t> out_sizes = {input.size(0), k, input.size(2), input.size(3)};
  TORCH_CHECK(!other || (other->sizes() == at::IntArrayRef(out_sizes) &&
                         other->scalar_type() == at::kFloat && other->device().is_cpu()),
              "kiln::winograd_conv2d: other must be a float32 CPU tensor of the output's sizes ",
              at::IntArrayRef(out_sizes));
  TORCH_CHECK(activation == "none" || activation == "relu",
              "kiln::winograd_conv2d: activation must be \"none\" or \"relu\", got \"",
              std::string(activation), "\"");
}

/// The same result by ATen's direct convolution, for inputs with NaN or infinities.
void direct_convolution(const at::Tensor& input, const at::Tensor& weight,
                        const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& other, bool relu, at::Tensor& out) {
  at::Tensor y = at::conv2d(input, weight, bias ? *bias : at::Tensor(), /*stride=*/1,
                            /*padding=*/1);
  if (other) y.add_(*other);
  if (relu) y.relu_();
  out.copy_(y);
}

}  // namespace

at::Tensor winograd_weight(const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 4 && weight.size(2) == 3 && weight.size(3) == 3 &&
                  weight.scalar_type() == at::kFloat && weight.layout() == at::kStrided,
              "kiln::winograd_weight: weight must be a dense float32 [K, C, 3, 3] tensor, got ",
              weight.sizes(), " ", weight.scalar_type());
  // G, for the points 0, 1, -1, 2, -2 and infinity.
  const at::Tensor g =
      at::tensor({1.0 / 4, 0.0, 0.0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6,
                  1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 24, -1.0 / 12, 1.0 / 6, 0.0, 0.0, 1.0},
                 at::kDouble)
          .view({kIn, 3});
  const at::Tensor u = at::einsum("ai,kcij,bj->abck", {g, weight.to(at::kDouble), g});
  return u.reshape({kPoints, weight.size(1), weight.size(0)}).to(at::kFloat).contiguous();
}

namespace {

/// winograd_conv2d_out on arguments check_arguments accepted.
at::Tensor& convolve(const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& transformed, const std::optional<at::Tensor>& bias,
                     const std::optional<at::Tensor>& other, std::string_view activation,
                     at::Tensor& out) {
  const Shape s{input.size(0),
                input.size(2),
                input.size(3),
                input.size(1),
                weight.size(0),
                (input.size(2) + kOut - 1) / kOut,
                (input.size(3) + kOut - 1) / kOut};
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.device().is_cpu(),
              "kiln::winograd_conv2d: out must be a float32 CPU tensor");
  const std::vector<int64_t> out_sizes = {s.n, s.k, s.h, s.w};
  if (out.sizes() != at::IntArrayRef(out_sizes))
    out.resize_(out_sizes, at::MemoryFormat::ChannelsLast);
  const bool relu = activation == "relu";

  const at::Tensor x = input.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor v = at::empty({kPoints, s.tiles(), s.c}, x.options());
  std::atomic<bool> finite = true;
  run_parallel(s.tiles(), grain(kPoints * s.c), [&](int64_t begin, int64_t end) {
    if (!transform_input(x.const_data_ptr<float>(), s, begin, end, v.mutable_data_ptr<float>()))
      finite = false;
  });
  if (!finite) {
    direct_convolution(input, weight, bias, other, relu, out);
    return out;
  }
  const at::Tensor m = at::bmm(v, transformed.contiguous());  // [36, tiles, K]
  v.reset();
  at::Tensor y =
      out.is_contiguous(at::MemoryFormat::ChannelsLast)
          ? out
          : at::empty(out_sizes, x.options().memory_format(at::MemoryFormat::ChannelsLast));
  const at::Tensor b = bias ? bias->contiguous() : at::Tensor();
  const at::Tensor r = other ? other->contiguous(at::MemoryFormat::ChannelsLast) : at::Tensor();
  const float* bias_data = b.defined() ? b.const_data_ptr<float>() : nullptr;
  const float* other_data = r.defined() ? r.const_data_ptr<float>() : nullptr;
  run_parallel(s.tiles(), grain(kPoints * s.k), [&](int64_t begin, int64_t end) {
    transform_output(m.const_data_ptr<float>(), s, bias_data, other_data, relu, begin, end,
                     y.mutable_data_ptr<float>());
  });
  if (!y.is_same(out)) out.copy_(y);
  return out;
}

}  // namespace

at::Tensor& winograd_conv2d_out(const at::Tensor& input, const at::Tensor& weight,
                                const at::Tensor& transformed,
                                const std::optional<at::Tensor>& bias,
                                const std::optional<at::Tensor>& other, std::string_view activation,
                                at::Tensor& out) {
  check_arguments(input, weight, transformed, bias, other, activation);
  return convolve(input, weight, transformed, bias, other, activation, out);
}

at::Tensor winograd_conv2d(const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& transformed, const std::optional<at::Tensor>& bias,
                           const std::optional<at::Tensor>& other, std::string_view activation) {
  check_arguments(input, weight, transformed, bias, other, activation);
  at::Tensor out = at::empty({input.size(0), weight.size(0), input.size(2), input.size(3)},
                             input.options().memory_format(at::MemoryFormat::ChannelsLast));
  return convolve(input, weight, transformed, bias, other, activation, out);
}

namespace {

at::Tensor conv_op(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& transformed,
                   const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& other,
                   c10::string_view activation) {
  return winograd_conv2d(input, weight, transformed, bias, other, std::string_view(activation));
}

at::Tensor& conv_out_op(const at::Tensor& input, const at::Tensor& weight,
                        const at::Tensor& transformed, const std::optional<at::Tensor>& bias,
                        const std::optional<at::Tensor>& other, c10::string_view activation,
                        at::Tensor& out) {
  return winograd_conv2d_out(input, weight, transformed, bias, other, std::string_view(activation),
                             out);
}

}  // namespace

TORCH_LIBRARY(kiln, m) {
  m.def("winograd_weight(Tensor weight) -> Tensor");
  m.def(
      "winograd_conv2d(Tensor input, Tensor weight, Tensor transformed, Tensor? bias, "
      "Tensor? other, str activation) -> Tensor");
  m.def(
      "winograd_conv2d.out(Tensor input, Tensor weight, Tensor transformed, Tensor? bias, "
      "Tensor? other, str activation, *, Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("winograd_weight", &winograd_weight);
  m.impl("winograd_conv2d", &conv_op);
  m.impl("winograd_conv2d.out", &conv_out_op);
}

}  // namespace kiln
