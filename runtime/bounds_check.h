// Checked runs (KILN_DEBUG=bounds). Generated kernels are not instrumented by any sanitizer, and
// in the arena a kernel that writes past its buffer lands silently in its neighbour's. In a
// checked run every buffer a kernel writes (planned intermediates and the kernels' own outputs)
// gets an allocation of its own, between two guard bands; the executor checks every band after
// every step and names the step that wrote over one.
//
// Bands and buffers start filled with 0xFF bytes, a NaN in every float type: a kernel that reads
// past its input's end, or reads an intermediate before anything wrote it, computes NaN where
// eager does not, and a differential test sees it. Writes that happen to store 0xFF bytes, and
// reads whose values are discarded, go unseen.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "passes/ir/types.h"

namespace kiln {

/// True when KILN_DEBUG=bounds.
bool bounds_checked();

class GuardedBuffers {
 public:
  /// Bytes of each guard band (a multiple of 64, so the buffer keeps the arena's alignment).
  static constexpr int64_t kGuardBytes = 1024;

  /// A tensor of `type` on `device` in an allocation of its own between two guard bands;
  /// `what` names it in errors.
  at::Tensor allocate(const ir::TensorType& type, c10::Device device, std::string what);
  /// Throws kiln::Error (internal) naming `step` and the buffer when a band changed.
  void check_after(const std::string& step) const;

 private:
  struct Guarded {
    at::Tensor bytes;  // band, buffer, band
    int64_t buffer_bytes;
    std::string what;
  };
  std::vector<Guarded> buffers_;
};

}  // namespace kiln
