#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/onednn/activation.h"

namespace kiln::onednn {

/// One 2-D convolution on float32 tensors, channels-last (NHWC) input, output and residual, as
/// kiln's `onednn_conv` pass describes it. Every field is part of the primitive's identity, the
/// thread count included: oneDNN picks its blocking (and so its weight layout) for the threads it
/// will run on.
struct ConvSpec {
  std::array<int64_t, 4> input{};   // N, C, H, W
  std::array<int64_t, 4> weight{};  // K, C / groups, kernel height, kernel width
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool bias = false;
  bool residual = false;  // adds an output-shaped tensor before the activation
  Activation activation = Activation::None;
  float lo = 0, hi = 0;  // Clip's bounds
  /// Multiplies in bf16 (input and weight rounded to bf16, products summed in float32); the
  /// input, bias, residual, post-ops and output stay float32.
  bool bf16 = false;
  int threads = 1;

  /// N, K, output height, output width.
  std::array<int64_t, 4> output() const;
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
  /// Reorders a dense float32 [K, C / groups, kh, kw] weight into `packed`
  /// (packed_weight_bytes()), converting it to bf16 for a bf16 primitive.
  void pack_weight(const float* dense, void* packed) const;
  /// output = activation(conv(input, packed weight) + bias + residual). `bias` (K floats) and
  /// `residual` (output-shaped, NHWC) are read only where the spec says so. `input_nchw`: the
  /// input is dense NCHW (a network's image), converted by a oneDNN reorder first (6x faster
  /// than kiln's generated copy for 3 channels; oneDNN's convolutions of an NCHW input into an
  /// NHWC output run its reference code). A bf16 primitive converts its input to bf16 the same
  /// way, in the one reorder.
  void run(const float* input, const void* packed_weight, const float* bias, const float* residual,
           float* output, bool input_nchw = false) const;
  /// oneDNN's name for the implementation it chose ("brgconv_1x1:avx512_core", ...).
  std::string implementation() const;

 private:
  struct State;
  explicit ConvPrimitive(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::onednn
