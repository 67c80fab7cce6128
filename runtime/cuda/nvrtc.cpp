#include "runtime/cuda/nvrtc.h"

#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "runtime/cuda/dynamic_library.h"

namespace kiln::cuda {
namespace {

// The slice of nvrtc.h kiln uses, declared here so kiln builds without the toolkit's headers.
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;

/// The path of a library loaded in this process whose file name starts with `prefix` (but is not
/// NVRTC's builtins), or "".
std::string loaded_library_path(const std::string& prefix) {
  struct Search {
    std::string prefix;
    std::string found;
  } search{prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::string file = std::filesystem::path(path).filename().string();
        if (file.rfind(s->prefix, 0) == 0 && file.find("builtins") == std::string::npos) {
          s->found = path;
          return 1;
        }
        return 0;
      },
      &search);
  return search.found;
}

struct Nvrtc {
  DynamicLibrary library;
  std::string unavailable;  // why not, or ""
  nvrtcResult (*version)(int*, int*) = nullptr;
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*) = nullptr;
  nvrtcResult (*destroy)(nvrtcProgram*) = nullptr;
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*ptx_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*ptx)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*cubin)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*log_size)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*log)(nvrtcProgram, char*) = nullptr;
  const char* (*error_string)(nvrtcResult) = nullptr;

  Nvrtc() : library(candidates()) {
    if (!library.is_open()) {
      unavailable = "NVRTC (the CUDA runtime compiler) was not found: " + library.error();
      return;
    }
    const bool bound =
        library.bind(version, "nvrtcVersion") && library.bind(create, "nvrtcCreateProgram") &&
        library.bind(destroy, "nvrtcDestroyProgram") &&
        library.bind(compile, "nvrtcCompileProgram") && library.bind(ptx_size, "nvrtcGetPTXSize") &&
        library.bind(ptx, "nvrtcGetPTX") && library.bind(cubin_size, "nvrtcGetCUBINSize") &&
        library.bind(cubin, "nvrtcGetCUBIN") && library.bind(log_size, "nvrtcGetProgramLogSize") &&
        library.bind(log, "nvrtcGetProgramLog") &&
        library.bind(error_string, "nvrtcGetErrorString");
    if (!bound) unavailable = "NVRTC is too old or incomplete: " + library.error();
  }

  static std::vector<std::string> candidates() {
    std::vector<std::string> names;
    if (const char* path = std::getenv("KILN_NVRTC"); path && *path) names.push_back(path);
    // One the process already loaded (PyTorch's own), then the loader's search path.
    if (std::string loaded = loaded_library_path("libnvrtc.so"); !loaded.empty())
      names.push_back(loaded);
    for (const char* name : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
      names.push_back(name);
    // The CUDA torch wheels' NVIDIA packages, beside the torch package whose libc10 is loaded.
    if (std::string c10 = loaded_library_path("libc10.so"); !c10.empty()) {
      const auto site = std::filesystem::path(c10).parent_path().parent_path().parent_path();
      for (const char* relative :
           {"nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
            "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"}) {
        if (std::filesystem::exists(site / relative)) names.push_back((site / relative).string());
      }
    }
    if (const char* home = std::getenv("CUDA_HOME"); home && *home)
      names.push_back(std::string(home) + "/lib64/libnvrtc.so");
    names.push_back("/usr/local/cuda/lib64/libnvrtc.so");
    return names;
  }

  std::string describe(nvrtcResult result) const {
    return error_string ? error_string(result) : "NVRTC error " + std::to_string(result);
  }
};

Nvrtc& nvrtc() {
  static Nvrtc instance;
  return instance;
}

std::string program_log(Nvrtc& n, nvrtcProgram program) {
  size_t size = 0;
  if (n.log_size(program, &size) != kNvrtcSuccess || size <= 1) return "";
  std::string text(size, '\0');
  n.log(program, text.data());
  text.resize(size - 1);
  return text;
}

std::mutex cache_mutex;
// Keyed by the whole source (its hash alone could collide and hand back another program).
std::map<std::pair<std::string, int>, std::shared_ptr<const NvrtcOutput>> cache;
int misses = 0;

}  // namespace

std::string nvrtc_unavailable_reason() {
  return nvrtc().unavailable;
}

std::string nvrtc_library_path() {
  return nvrtc().unavailable.empty() ? nvrtc().library.path() : "";
}

int nvrtc_version() {
  Nvrtc& n = nvrtc();
  int major = 0, minor = 0;
  if (!n.unavailable.empty() || n.version(&major, &minor) != kNvrtcSuccess) return 0;
  return major * 1000 + minor * 10;
}

NvrtcOutput nvrtc_compile(const std::string& source, int arch, const std::string& name,
                          bool cubin) {
  Nvrtc& n = nvrtc();
  if (!n.unavailable.empty()) throw Error(ErrorKind::Unsupported, n.unavailable);
  nvrtcProgram program = nullptr;
  const std::string file = name + ".cu";
  nvrtcResult status = n.create(&program, source.c_str(), file.c_str(), 0, nullptr, nullptr);
  if (status != kNvrtcSuccess) {
    throw Error(ErrorKind::Backend, "NVRTC could not take " + file + ": " + n.describe(status));
  }
  // Strict IEEE float math (no fast-math, no FMA contraction): a value computed in two passes
  // over a row must round alike in both, as on the CPU.
  const std::string gpu =
      (cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") + std::to_string(arch);
  const char* options[] = {gpu.c_str(), "--std=c++17", "--fmad=false", "-DNDEBUG"};
  status = n.compile(program, 4, options);
  NvrtcOutput output;
  output.arch = arch;
  output.log = program_log(n, program);
  if (status != kNvrtcSuccess) {
    n.destroy(&program);
    throw Error(ErrorKind::Backend, "NVRTC failed to compile " + file + " for sm_" +
                                        std::to_string(arch) + " (" + n.describe(status) +
                                        "); its log:\n" + output.log);
  }
  size_t size = 0;
  if (n.ptx_size(program, &size) == kNvrtcSuccess && size > 0) {
    output.ptx.resize(size);
    n.ptx(program, output.ptx.data());
    output.ptx.resize(size - 1);  // the trailing NUL
  }
  if (cubin && n.cubin_size(program, &size) == kNvrtcSuccess && size > 0) {
    output.cubin.resize(size);
    n.cubin(program, output.cubin.data());
  }
  n.destroy(&program);
  if (cubin && output.cubin.empty()) {
    throw Error(ErrorKind::Backend,
                "NVRTC produced no CUBIN for " + file + " (sm_" + std::to_string(arch) + ")");
  }
  return output;
}

std::shared_ptr<const NvrtcOutput> nvrtc_compile_cached(const std::string& source, int arch,
                                                        const std::string& name) {
  auto key = std::make_pair(source, arch);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto hit = cache.find(key); hit != cache.end()) return hit->second;
  }
  // Compiled outside the lock: two threads may compile the same source once each.
  auto output = std::make_shared<const NvrtcOutput>(nvrtc_compile(source, arch, name));
  std::lock_guard<std::mutex> lock(cache_mutex);
  ++misses;
  return cache.emplace(std::move(key), output).first->second;
}

int nvrtc_cache_misses() {
  std::lock_guard<std::mutex> lock(cache_mutex);
  return misses;
}

}  // namespace kiln::cuda
