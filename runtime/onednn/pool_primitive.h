#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::onednn {

/// One 2-D max or average pool, as PyTorch's max_pool2d and avg_pool2d describe them, on a float32
/// or bf16 tensor laid out channels-last (NHWC) or dense NCHW; the output has the input's type and
/// layout. Every field is part of the primitive's identity, the thread count included.
struct PoolSpec {
  std::array<int64_t, 4> input{};  // N, C, H, W
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  bool ceil_mode = false;
  bool average = false;          // else max
  bool include_padding = false;  // an average's count_include_pad
  bool bf16 = false;
  bool nchw = false;  // else NHWC
  int threads = 1;

  /// N, C, output height, output width, as PyTorch computes them (ceil_mode's last window starts
  /// inside the input or its left padding).
  std::array<int64_t, 4> output() const;
  /// Empty when oneDNN can run it; otherwise what is wrong with it, in PyTorch's terms.
  std::string problem() const;
  /// The padding oneDNN adds after the input along H and W: what the last window needs (ceil_mode's
  /// may reach past PyTorch's padding).
  std::array<int64_t, 2> right_padding() const;
  /// Whether oneDNN's average gives PyTorch's: counting the padding, PyTorch divides a window by
  /// its cells up to the padding's end, oneDNN by the kernel's size, so no window may reach past
  /// the padding (only ceil_mode's last one can).
  bool divides_as_pytorch() const;
  bool operator==(const PoolSpec&) const = default;
};

/// A oneDNN pooling primitive made once per PoolSpec and kept for the life of the process.
/// ATen's channels-last max_pool2d took 0.53 ms for ResNet's 1x64x112x112 3x3 stride-2 pool on 2
/// threads (its NCHW one 6.4 ms); OpenVINO's, a oneDNN-derived kernel, ~0.1 ms. Thread-safe.
class PoolPrimitive {
 public:
  /// Throws std::invalid_argument when spec.problem() is not empty, std::runtime_error when
  /// oneDNN has no implementation for it.
  static std::shared_ptr<const PoolPrimitive> get(const PoolSpec& spec);
  /// get's primitive, or null where oneDNN has no implementation for the spec (bf16 pooling on
  /// a CPU below AVX-512): remembered, so asking again costs a lookup, not a failed creation.
  static std::shared_ptr<const PoolPrimitive> find(const PoolSpec& spec);

  ~PoolPrimitive();
  PoolPrimitive(const PoolPrimitive&) = delete;
  PoolPrimitive& operator=(const PoolPrimitive&) = delete;

  /// output = max_pool2d(input) or avg_pool2d(input), both in the spec's type and layout.
  void run(const void* input, void* output) const;
  /// oneDNN's name for the implementation it chose.
  std::string implementation() const;

 private:
  struct State;
  explicit PoolPrimitive(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::onednn
