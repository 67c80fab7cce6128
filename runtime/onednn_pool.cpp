#include "runtime/onednn_pool.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>  // at::get_num_threads
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtime/onednn/pool_primitive.h"
#include "runtime/parallel.h"

namespace kiln {
namespace {

using onednn::PoolPrimitive;
using onednn::PoolSpec;

constexpr const char* kMax = "kiln::onednn_max_pool2d";
constexpr const char* kAverage = "kiln::onednn_avg_pool2d";

std::array<int64_t, 2> pair(at::IntArrayRef values, const char* op, const char* what) {
  TORCH_CHECK(values.size() == 2, op, ": ", what, " must have 2 values, got ", values);
  return {values[0], values[1]};
}

bool channels_last(const at::Tensor& t) {
  return t.is_contiguous(at::MemoryFormat::ChannelsLast) && !t.is_contiguous();
}

/// A max pool's spec; an average's is this one with `average` (and no dilation) set.
PoolSpec make_spec(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                   const char* op = kMax) {
  TORCH_CHECK(input.dim() == 4 && input.is_cpu() &&
                  (input.scalar_type() == at::kFloat || input.scalar_type() == at::kBFloat16),
              op, ": input must be a 4-D float32 or bf16 CPU tensor, got ", input.sizes(), " ",
              input.scalar_type(), " on ", input.device());
  PoolSpec spec;
  std::copy(input.sizes().begin(), input.sizes().end(), spec.input.begin());
  spec.kernel = pair(kernel_size, op, "kernel_size");
  spec.stride = pair(stride, op, "stride");
  spec.padding = pair(padding, op, "padding");
  spec.dilation = pair(dilation, op, "dilation");
  spec.ceil_mode = ceil_mode;
  spec.bf16 = input.scalar_type() == at::kBFloat16;
  spec.nchw = !channels_last(input);
  spec.threads = at::get_num_threads();
  const std::string problem = spec.problem();
  TORCH_CHECK(problem.empty(), op, ": ", problem, " (input ", input.sizes(), ", kernel ",
              kernel_size, ", stride ", stride, ", padding ", padding, ")");
  return spec;
}

PoolSpec make_average_spec(const at::Tensor& input, at::IntArrayRef kernel_size,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad) {
  PoolSpec spec = make_spec(input, kernel_size, stride, padding, {1, 1}, ceil_mode, kAverage);
  spec.average = true;
  spec.include_padding = count_include_pad;
  return spec;
}

/// Whether bits[begin, end) holds a NaN: a value whose exponent is all ones and whose fraction is
/// not zero, as 16-bit words (bf16) or 32-bit ones (float32).
template <class Word>
bool any_nan(const Word* bits, int64_t begin, int64_t end) {
  constexpr bool wide = sizeof(Word) == 4;
  constexpr Word magnitude = wide ? 0x7fffffff : 0x7fff, infinity = wide ? 0x7f800000 : 0x7f80;
  int64_t i = begin;
#if defined(__SSE2__)
  // Four or eight words at a time (compiled for the baseline x86-64, the loop below is not
  // vectorized): the masked words are non-negative, so the signed compare is the unsigned one.
  constexpr int64_t lanes = 16 / sizeof(Word);
  const __m128i mask = wide ? _mm_set1_epi32(magnitude) : _mm_set1_epi16(magnitude);
  const __m128i limit = wide ? _mm_set1_epi32(infinity) : _mm_set1_epi16(infinity);
  __m128i found = _mm_setzero_si128();
  for (; i + lanes <= end; i += lanes) {
    const __m128i v =
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i)), mask);
    found = _mm_or_si128(found, wide ? _mm_cmpgt_epi32(v, limit) : _mm_cmpgt_epi16(v, limit));
  }
  if (_mm_movemask_epi8(found) != 0) return true;
#endif
  for (; i < end; ++i)
    if ((bits[i] & magnitude) > infinity) return true;
  return false;
}

/// Whether `x` (dense, float32 or bf16) holds a NaN. oneDNN's max skips NaNs where ATen's
/// propagates them, so such an input is pooled by ATen. One pass over the input, a fraction of
/// oneDNN's pool (the input is usually still in cache, just written by the convolution before).
bool has_nan(const at::Tensor& x) {
  std::atomic<bool> found = false;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  const void* data = x.const_data_ptr();
  run_parallel(x.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    const bool nan = bf16 ? any_nan(static_cast<const uint16_t*>(data), begin, end)
                          : any_nan(static_cast<const uint32_t*>(data), begin, end);
    if (nan) found = true;
  });
  return found;
}

at::MemoryFormat format_of(const PoolSpec& spec) {
  return spec.nchw ? at::MemoryFormat::Contiguous : at::MemoryFormat::ChannelsLast;
}

/// Pools `input` into `out` (resized to the spec's output, any layout) with the spec's primitive,
/// or with `aten_pool(x)` where `use_aten(x)` says oneDNN would not give ATen's values or oneDNN
/// has no implementation for the spec.
template <class AtenPool, class UseAten>
at::Tensor& pool_into(const PoolSpec& spec, const char* op, const at::Tensor& input,
                      at::Tensor& out, AtenPool&& aten_pool, UseAten&& use_aten) {
  const at::Tensor x = input.contiguous(format_of(spec));
  TORCH_CHECK(out.scalar_type() == input.scalar_type() && out.is_cpu(), op,
              ": out must be a CPU tensor of the input's type (", input.scalar_type(), "), got ",
              out.scalar_type(), " on ", out.device());
  const auto sizes = spec.output();
  const at::IntArrayRef out_sizes(sizes.data(), sizes.size());
  if (out.sizes() != out_sizes) out.resize_(out_sizes, format_of(spec));
  at::Tensor target = out;
  if (!out.is_contiguous(format_of(spec)) || out.is_same(x)) {
    target = at::empty(out_sizes, out.options().memory_format(format_of(spec)));
  }
  std::shared_ptr<const PoolPrimitive> primitive;
  if (use_aten(x) || !(primitive = PoolPrimitive::find(spec))) {
    target.copy_(aten_pool(x));
  } else {
    primitive->run(x.const_data_ptr(), target.data_ptr());
  }
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

}  // namespace

at::Tensor& onednn_max_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel_size,
                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out) {
  const PoolSpec spec = make_spec(input, kernel_size, stride, padding, dilation, ceil_mode);
  return pool_into(
      spec, kMax, input, out,
      [&](const at::Tensor& x) {
        return at::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
      },
      [](const at::Tensor& x) { return has_nan(x); });
}

at::Tensor& onednn_avg_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel_size,
                                  at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                  bool count_include_pad, at::Tensor& out) {
  const PoolSpec spec =
      make_average_spec(input, kernel_size, stride, padding, ceil_mode, count_include_pad);
  // A NaN averages to NaN in both; only ceil_mode's window past the padding divides otherwise.
  const bool aten = !spec.divides_as_pytorch();
  return pool_into(
      spec, kAverage, input, out,
      [&](const at::Tensor& x) {
        return at::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
      },
      [&](const at::Tensor&) { return aten; });
}

namespace {

at::Tensor empty_output(const at::Tensor& input, const PoolSpec& spec) {
  const auto sizes = spec.output();
  return at::empty(at::IntArrayRef(sizes.data(), sizes.size()),
                   input.options().memory_format(format_of(spec)));
}

at::Tensor max_pool_op(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out =
      empty_output(input, make_spec(input, kernel_size, stride, padding, dilation, ceil_mode));
  return onednn_max_pool2d_out(input, kernel_size, stride, padding, dilation, ceil_mode, out);
}

at::Tensor avg_pool_op(const at::Tensor& input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                       at::IntArrayRef padding, bool ceil_mode, bool count_include_pad) {
  at::Tensor out = empty_output(
      input, make_average_spec(input, kernel_size, stride, padding, ceil_mode, count_include_pad));
  return onednn_avg_pool2d_out(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                               out);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def(
      "onednn_max_pool2d(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding, "
      "int[2] dilation, bool ceil_mode) -> Tensor");
  m.def(
      "onednn_max_pool2d.out(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding, "
      "int[2] dilation, bool ceil_mode, *, Tensor(a!) out) -> Tensor(a!)");
  m.def(
      "onednn_avg_pool2d(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding, "
      "bool ceil_mode, bool count_include_pad) -> Tensor");
  m.def(
      "onednn_avg_pool2d.out(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding, "
      "bool ceil_mode, bool count_include_pad, *, Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("onednn_max_pool2d", &max_pool_op);
  m.impl("onednn_max_pool2d.out", &onednn_max_pool2d_out);
  m.impl("onednn_avg_pool2d", &avg_pool_op);
  m.impl("onednn_avg_pool2d.out", &onednn_avg_pool2d_out);
}

}  // namespace kiln
