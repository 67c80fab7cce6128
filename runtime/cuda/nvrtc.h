// NVRTC, loaded at run time: CUDA C source to PTX and CUBIN for one GPU architecture. Needs no GPU
// and no driver. Torch-free.
#pragma once

#include <memory>
#include <string>

namespace kiln::cuda {

struct NvrtcOutput {
  int arch = 0;       // 80 for sm_80, 90 for sm_90, ...
  std::string ptx;    // the PTX NVRTC generated
  std::string cubin;  // the same program assembled for sm_<arch> (NVRTC runs ptxas inside)
  std::string log;    // NVRTC's log (warnings), possibly empty
};

/// "" when NVRTC can be used here; else why not (which libraries were tried and what the loader
/// said). Looks in KILN_NVRTC (a full path), then an NVRTC this process already loaded, then the
/// loader's search path for libnvrtc.so, .so.13 and .so.12, then the NVIDIA pip packages beside
/// the loaded torch (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib), then $CUDA_HOME/lib64 and
/// /usr/local/cuda/lib64.
std::string nvrtc_unavailable_reason();

/// The NVRTC library in use ("" when none loads).
std::string nvrtc_library_path();

/// NVRTC's version as major * 1000 + minor * 10 (13.0 -> 13000), or 0 when unavailable.
int nvrtc_version();

/// Compiles `source` for sm_<arch> (with `cubin` false: PTX for compute_<arch> only, leaving
/// `cubin` empty; quicker, for checking with ptxas). Throws kiln::Error: Unsupported when NVRTC is
/// unavailable (the message says why), Backend with NVRTC's log when the source does not compile.
NvrtcOutput nvrtc_compile(const std::string& source, int arch, const std::string& name,
                          bool cubin = true);

/// nvrtc_compile, remembered per (source, arch) for the life of the process.
std::shared_ptr<const NvrtcOutput> nvrtc_compile_cached(const std::string& source, int arch,
                                                        const std::string& name);

/// How many nvrtc_compile_cached calls compiled (rather than found the result cached).
int nvrtc_cache_misses();

}  // namespace kiln::cuda
