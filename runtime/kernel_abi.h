// The calling convention between generated kernels and the executor (torch-free, so both the
// code generators and the runtime include it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace kiln {

/// Computes the part [begin, end) of the kernel's launch range; `buffers` holds one data pointer
/// per kernel buffer (inputs, then outputs), each already at its tensor's storage offset. `sizes`
/// holds a size-generic kernel's run-time size inputs (passes/kernel/size_terms.h), one int64
/// each in the kernel's order; a kernel of constant sizes never reads it (it may be null).
using KernelFunction = void (*)(void* const* buffers, const int64_t* sizes, int64_t begin,
                                int64_t end);

/// How the runtime calls a kernel function: over [0, range) in pieces of at least `grain`
/// (at::parallel_for's grain). Elementwise kernels split their elements, reducing kernels their
/// rows.
struct KernelLaunch {
  int64_t range = 0;
  int64_t grain = 1;
  bool operator==(const KernelLaunch&) const = default;
};

/// The second phase of a CPU kernel split into pieces (passes/kernel/split_reduction.h): the
/// kernel function writes each piece's partial results into a workspace, after its buffers;
/// `function` then folds them, on one thread, over the buffers `buffers` names (indices into
/// the kernel's buffers followed by the workspace parts), for each of the kernel's `rows`.
struct FinishPhase {
  KernelFunction function = nullptr;
  int64_t rows = 1;
  std::vector<int> buffers;
  /// Byte offsets of the workspace parts (one per partial result, 8-byte aligned) and its size.
  std::vector<int64_t> workspace_offsets;
  int64_t workspace_bytes = 0;
};

/// Appends the workspace parts of `finish` to `buffers`, carved from `workspace` (grown here,
/// never shrunk, so a caller may keep one from call to call): what the kernel function of a
/// split kernel takes after its own buffers. Its contents need no clearing: the partial kernel
/// writes every partial before the finish reads it.
inline void add_workspace(const FinishPhase& finish, std::vector<int64_t>& workspace,
                          std::vector<void*>& buffers) {
  const size_t words = static_cast<size_t>((finish.workspace_bytes + 7) / 8);
  if (workspace.size() < words) workspace.resize(words);
  for (int64_t offset : finish.workspace_offsets)
    buffers.push_back(reinterpret_cast<char*>(workspace.data()) + offset);
}

/// Runs `finish` once the kernel function has covered its range; `buffers` as add_workspace
/// left them.
inline void run_finish(const FinishPhase& finish, const std::vector<void*>& buffers) {
  std::vector<void*> own;
  for (int b : finish.buffers)
    own.push_back(buffers[b]);
  finish.function(own.data(), nullptr, 0, finish.rows);
}

/// A generated kernel that runs on a GPU: queued on a stream, never waited for.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  /// `buffers`: one device pointer per kernel buffer (inputs, then outputs), then the workspace
  /// when workspace_bytes() > 0. `stream` is the native stream handle (a cudaStream_t).
  virtual void launch(const std::vector<void*>& buffers, int device, void* stream) const = 0;
  /// Zeroed device memory the launch needs besides its buffers (split reductions), or 0.
  virtual int64_t workspace_bytes() const { return 0; }
  /// Size-generic kernels (passes/kernel/size_terms.h): the kernel launched at these size
  /// inputs, one int64 each in the kernel's order (a plan instantiated from a shape class binds
  /// its kernels once). Null for a kernel of constant sizes, which launches as it is.
  virtual std::shared_ptr<const DeviceKernel> at_sizes(std::span<const int64_t> sizes) const {
    (void)sizes;
    return nullptr;
  }
};

/// One generated kernel, as a code generator hands it to the plan: a CPU function with its
/// launch, or a GPU kernel.
struct CompiledKernel {
  /// CPU: fn(buffers, sizes, begin, end) over [0, range) in pieces of at least `grain`
  /// (at::parallel_for's grain). Elementwise kernels split their elements, reducing kernels their
  /// rows.
  KernelFunction function = nullptr;
  int64_t range = 0;
  int64_t grain = 1;
  /// CPU: set for a full reduction split into pieces: `function` over `range` writes the
  /// partials, then this folds them.
  std::optional<FinishPhase> finish;
  /// CPU, size-generic kernels only: the launch at the call's size inputs (`range` and `grain`
  /// then hold the example binding's). One compiled function serves every binding.
  std::function<KernelLaunch(const int64_t* sizes)> launch_at;
  /// Size-generic kernels only: whether the schedule the code follows (taken at the example
  /// binding: on the CPU streaming stores, prefetches, row caches, one-pass moments, ...) is the
  /// one these size inputs would choose. The CPU's code is correct either way; a GPU kernel's
  /// (its vector width, index type and row cache) only where it holds. A shape class serves
  /// only the bindings where it holds (backend/api/compile_class.h).
  std::function<bool(const int64_t* sizes)> schedule_holds;
  /// CPU: what `function` is passed as `sizes`: a size-generic kernel's size inputs at the plan's
  /// binding (a plan instantiated from a shape class), empty otherwise.
  std::vector<int64_t> size_values;
  /// GPU (then `function` is null): launched on the current stream.
  std::shared_ptr<const DeviceKernel> device_kernel;
};

}  // namespace kiln
