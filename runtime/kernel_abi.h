// The calling convention between generated kernels and the executor (torch-free, so both the
// code generators and the runtime include it).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

/// Computes the part [begin, end) of the kernel's launch range; `buffers` holds one data pointer
/// per kernel buffer (inputs, then outputs), each already at its tensor's storage offset.
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

/// A generated kernel that runs on a GPU: queued on a stream, never waited for.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  /// `buffers`: one device pointer per kernel buffer (inputs, then outputs), then the workspace
  /// when workspace_bytes() > 0. `stream` is the native stream handle (a cudaStream_t).
  virtual void launch(const std::vector<void*>& buffers, int device, void* stream) const = 0;
  /// Zeroed device memory the launch needs besides its buffers (split reductions), or 0.
  virtual int64_t workspace_bytes() const { return 0; }
};

}  // namespace kiln
