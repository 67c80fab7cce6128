#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/onednn/activation.h"

namespace kiln::onednn {

/// One 2-D or 3-D convolution on channels-last (NHWC, NDHWC) input, output and residual, as
/// kiln's `onednn_conv` pass describes it: float32, or bf16 where the spec says so. Every field is
/// part of the primitive's identity, the thread count included: oneDNN picks its blocking (and so
/// its weight layout) for the threads it will run on.
struct ConvSpec {
  /// 2 or 3: how many of the entries below after N and C (K and C / groups) are spatial. The
  /// entries past them are unused and keep their defaults.
  int spatial = 2;
  std::array<int64_t, 5> input{};   // N, C, [D,] H, W
  std::array<int64_t, 5> weight{};  // K, C / groups, [kernel depth,] kernel height, kernel width
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> padding{0, 0, 0};
  std::array<int64_t, 3> dilation{1, 1, 1};
  int64_t groups = 1;
  bool bias = false;
  bool residual = false;  // adds an output-shaped tensor before the activation
  Activation activation = Activation::None;
  float lo = 0, hi = 0;  // Clip's bounds
  /// Multiplies in bf16 (input and weight rounded to bf16, products summed in float32); the
  /// bias and the post-ops stay float32. Its input may be float32 (rounded on each run) or bf16.
  bool bf16 = false;
  /// A bf16 convolution's output, and the residual it adds, in bf16 rather than float32 (the
  /// post-ops still compute in float32; the output is rounded once, at the end): where every
  /// reader multiplies in bf16 anyway, they read half the bytes and round nothing themselves.
  bool bf16_output = false;
  bool bf16_residual = false;
  /// The residual lies in the output buffer already (the memory plan put the output over it):
  /// oneDNN adds the convolution into it (a sum post-op), where otherwise it reads the residual
  /// beside the output (a binary post-op). The same values; one buffer and one stream fewer.
  bool accumulate = false;
  int threads = 1;

  /// N, K, the output's [depth,] height and width; unused entries 0.
  std::array<int64_t, 5> output() const;
  /// 2 + spatial: the rank of the input, the weight and the output.
  int rank() const { return 2 + spatial; }
  /// Empty when oneDNN can run it; otherwise what is wrong with it.
  std::string problem() const;
  bool operator==(const ConvSpec&) const = default;
};

/// A oneDNN convolution primitive created once per ConvSpec (the creation costs 20-350 us; ATen's
/// `mkldnn::_convolution_pointwise` pays ~25 us of it on every call) and run on raw pointers.
/// Thread-safe: any number of threads may run one primitive at once (each with its own
/// scratchpad).
class ConvPrimitive {
 public:
  /// The primitive for `spec`, made on first use and kept for the life of the process. Throws
  /// std::invalid_argument when spec.problem() is not empty, std::runtime_error when oneDNN
  /// has no implementation for it.
  static std::shared_ptr<const ConvPrimitive> get(const ConvSpec& spec);

  ~ConvPrimitive();
  ConvPrimitive(const ConvPrimitive&) = delete;
  ConvPrimitive& operator=(const ConvPrimitive&) = delete;

  /// Bytes of the weight in the layout this primitive reads.
  size_t packed_weight_bytes() const;
  /// Identifies that layout: two primitives read each other's packed weights when it is equal.
  uint64_t packed_weight_layout() const;
  /// Reorders a dense float32 [K, C / groups, [kd,] kh, kw] weight into `packed`
  /// (packed_weight_bytes()), converting it to bf16 for a bf16 primitive.
  void pack_weight(const float* dense, void* packed) const;
  /// How run() finds its input.
  enum class Source {
    Nhwc,      // float32 NHWC (NDHWC for a 3-D convolution, likewise below)
    Nchw,      // float32, dense NCHW or NCDHW (a network's image or clip)
    NhwcBf16,  // bf16 NHWC, as another bf16 convolution wrote it (a bf16 primitive's only)
  };
  /// output = activation(conv(input, packed weight) + bias + residual). `bias` (K floats) and
  /// `residual` (output-shaped, NHWC, bf16 where spec.bf16_residual) are read only where the
  /// spec says so; `output` is bf16 where spec.bf16_output. Where spec.accumulate, `residual`
  /// must be `output`, which holds the residual on entry. A dense NCHW input is converted by a
  /// oneDNN reorder first (6x faster than kiln's generated copy for 3 channels; oneDNN's
  /// convolutions of an NCHW input into an NHWC output run its reference code). A bf16
  /// primitive converts a float32 input to bf16 the same way, in the one reorder.
  void run(const void* input, const void* packed_weight, const float* bias, const void* residual,
           void* output, Source source = Source::Nhwc) const;
  /// oneDNN's name for the implementation it chose ("brgconv_1x1:avx512_core", ...).
  std::string implementation() const;

 private:
  struct State;
  explicit ConvPrimitive(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::onednn
