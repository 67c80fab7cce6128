// The CUDA driver, loaded at run time (libcuda.so.1): loads CUBINs into the device's primary
// context and launches kernels on a stream kiln is handed (PyTorch's current stream). Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kiln::cuda {

/// "" when the driver is usable and has at least one device; else why not.
std::string driver_unavailable_reason();

/// Compute capability of device `index` as major * 10 + minor (90 for an H100/H200).
/// Throws kiln::Error (Unsupported) when the driver is unavailable.
int compute_capability(int device);
int multiprocessor_count(int device);

struct LaunchShape {
  unsigned grid = 1;
  unsigned block = 1;
};

/// A CUBIN's kernels, loaded on each device the first time they run there. Thread-safe.
class CudaModule {
 public:
  CudaModule(std::string cubin, std::vector<std::string> entries);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  /// Launches entry `kernel` asynchronously on `stream` (a CUstream; nullptr: the legacy default
  /// stream) of `device`, passing the pointers, then the sizes (a size-generic kernel's `long
  /// long` size inputs), as its parameters. Throws kiln::Error (Backend) with the driver's
  /// message on failure.
  void launch(int kernel, int device, void* stream, LaunchShape shape,
              const std::vector<void*>& pointers, std::span<const int64_t> sizes = {}) const;

 private:
  struct Loaded;
  const Loaded& loaded_on(int device) const;

  std::string cubin_;
  std::vector<std::string> entries_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Loaded>> devices_;
};

}  // namespace kiln::cuda
