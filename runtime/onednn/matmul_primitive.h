#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/onednn/activation.h"

namespace kiln::onednn {

/// How a matmul operand lies in memory: in oneDNN's blocked layout, packed once (a frozen weight),
/// or dense: row-major, or transposed (its transpose row-major).
enum class OperandLayout { Packed, RowMajor, Transposed };

/// One linear layer on float32 tensors, y[rows, n] = activation(x[rows, k] w[k, n] + b), row-major
/// y, as kiln's `prepack_linear` pass describes it. x is row-major or transposed; w is packed (a
/// linear layer's frozen weight, given as [n, k]: its transpose), or dense in either layout (an
/// operand that changes from call to call: a training graph's weight or activation). The thread
/// count is part of its identity, as for ConvSpec: oneDNN blocks the weight for the threads it will
/// run on.
struct MatmulSpec {
  int64_t rows = 0, k = 0, n = 0;
  bool source_transposed = false;
  OperandLayout weights = OperandLayout::Packed;
  bool bias = false;
  Activation activation = Activation::None;  // not Clip: a linear takes no bounds
  /// Multiplies in bf16 (x and w rounded to bf16, products summed in float32); b and the
  /// activation stay float32, and so do x and y unless they are bf16 themselves: x where run()
  /// is told so, y where bf16_output (a bf16 primitive's only).
  bool bf16 = false;
  bool bf16_output = false;
  int threads = 1;

  /// Empty when oneDNN can run it; otherwise what is wrong with it.
  std::string problem() const;
  bool operator==(const MatmulSpec&) const = default;
};

/// A oneDNN matmul primitive created once per MatmulSpec (ATen's `mkldnn::_linear_pointwise`
/// creates one on every call, ~20 us) and run on raw pointers; thread-safe like ConvPrimitive.
class MatmulPrimitive {
 public:
  /// The primitive for `spec`, made on first use and kept for the life of the process. Throws
  /// std::invalid_argument when spec.problem() is not empty, std::runtime_error when oneDNN has
  /// no implementation for it.
  static std::shared_ptr<const MatmulPrimitive> get(const MatmulSpec& spec);

  ~MatmulPrimitive();
  MatmulPrimitive(const MatmulPrimitive&) = delete;
  MatmulPrimitive& operator=(const MatmulPrimitive&) = delete;

  size_t packed_weight_bytes() const;
  uint64_t packed_weight_layout() const;
  /// Reorders a dense row-major float32 [n, k] weight (a linear layer's) into `packed`,
  /// converting it to bf16 for a bf16 primitive.
  void pack_weight(const float* dense, void* packed) const;
  /// output = input weight (+ bias), the weight packed or dense as the spec says. A bf16 primitive
  /// reads a bf16 `input` as it is (bf16_input) and converts a float32 one first, with a oneDNN
  /// reorder into this thread's staging buffer; `output` is bf16 where spec.bf16_output.
  void run(const void* input, const void* packed_weight, const float* bias, void* output,
           bool bf16_input = false) const;
  std::string implementation() const;

 private:
  struct State;
  explicit MatmulPrimitive(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kiln::onednn
