#include "runtime/cuda/driver.h"

#include "kiln/error.h"
#include "runtime/cuda/dynamic_library.h"

namespace kiln::cuda {
namespace {

// The slice of cuda.h kiln uses, declared here so kiln builds without the toolkit's headers.
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
constexpr CUresult kSuccess = 0;
constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;

struct Driver {
  DynamicLibrary library{{"libcuda.so.1", "libcuda.so"}};
  std::string unavailable;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*attribute)(int*, int, CUdevice) = nullptr;
  CUresult (*retain_primary)(CUcontext*, CUdevice) = nullptr;
  CUresult (*get_current)(CUcontext*) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*unload)(CUmodule) = nullptr;
  CUresult (*get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;

  Driver() {
    if (!library.is_open()) {
      unavailable = "the CUDA driver (libcuda.so.1) was not found: " + library.error();
      return;
    }
    const bool bound =
        library.bind(init, "cuInit") && library.bind(device_count, "cuDeviceGetCount") &&
        library.bind(device_get, "cuDeviceGet") &&
        library.bind(attribute, "cuDeviceGetAttribute") &&
        library.bind(retain_primary, "cuDevicePrimaryCtxRetain") &&
        library.bind(get_current, "cuCtxGetCurrent") &&
        library.bind(set_current, "cuCtxSetCurrent") &&
        library.bind(load_data, "cuModuleLoadData") && library.bind(unload, "cuModuleUnload") &&
        library.bind(get_function, "cuModuleGetFunction") &&
        library.bind(launch, "cuLaunchKernel") && library.bind(error_string, "cuGetErrorString");
    if (!bound) {
      unavailable = "the CUDA driver is incomplete: " + library.error();
      return;
    }
    int count = 0;
    if (CUresult r = init(0); r != kSuccess) {
      unavailable = "the CUDA driver failed to initialize: " + describe(r);
    } else if (device_count(&count) != kSuccess || count == 0) {
      unavailable = "the CUDA driver found no GPU";
    }
  }

  std::string describe(CUresult result) const {
    const char* text = nullptr;
    if (error_string && error_string(result, &text) == kSuccess && text) return text;
    return "CUDA driver error " + std::to_string(result);
  }

  void check(CUresult result, const std::string& what) const {
    if (result != kSuccess) throw Error(ErrorKind::Backend, what + ": " + describe(result));
  }
};

Driver& driver() {
  static Driver instance;
  return instance;
}

Driver& usable_driver() {
  Driver& d = driver();
  if (!d.unavailable.empty()) throw Error(ErrorKind::Unsupported, d.unavailable);
  return d;
}

int device_attribute(int device, int which) {
  Driver& d = usable_driver();
  CUdevice handle = 0;
  d.check(d.device_get(&handle, device), "cuDeviceGet(" + std::to_string(device) + ")");
  int value = 0;
  d.check(d.attribute(&value, which, handle), "cuDeviceGetAttribute");
  return value;
}

/// Makes the device's primary context (the one PyTorch's runtime uses) current on this thread.
CUcontext use_primary_context(int device) {
  Driver& d = usable_driver();
  CUdevice handle = 0;
  d.check(d.device_get(&handle, device), "cuDeviceGet(" + std::to_string(device) + ")");
  CUcontext context = nullptr;
  d.check(d.retain_primary(&context, handle), "cuDevicePrimaryCtxRetain");
  CUcontext current = nullptr;
  d.get_current(&current);
  if (current != context) d.check(d.set_current(context), "cuCtxSetCurrent");
  return context;
}

}  // namespace

std::string driver_unavailable_reason() {
  return driver().unavailable;
}

int compute_capability(int device) {
  return device_attribute(device, kAttributeComputeCapabilityMajor) * 10 +
         device_attribute(device, kAttributeComputeCapabilityMinor);
}

int multiprocessor_count(int device) {
  return device_attribute(device, kAttributeMultiprocessorCount);
}

struct CudaModule::Loaded {
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
};

CudaModule::CudaModule(std::string cubin, std::vector<std::string> entries)
    : cubin_(std::move(cubin)), entries_(std::move(entries)) {}

CudaModule::~CudaModule() {
  // Modules go with their context; unload only while the driver is still there.
  Driver& d = driver();
  if (!d.unavailable.empty()) return;
  for (const auto& loaded : devices_) {
    if (!loaded || !loaded->module) continue;
    CUcontext current = nullptr;
    d.get_current(&current);
    if (current != loaded->context) d.set_current(loaded->context);
    d.unload(loaded->module);
    if (current != loaded->context) d.set_current(current);
  }
}

const CudaModule::Loaded& CudaModule::loaded_on(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device < 0) throw Error(ErrorKind::Internal, "CUDA launch on a negative device index");
  if (static_cast<size_t>(device) >= devices_.size()) devices_.resize(device + 1);
  if (devices_[device]) return *devices_[device];
  Driver& d = usable_driver();
  auto loaded = std::make_unique<Loaded>();
  loaded->context = use_primary_context(device);
  d.check(d.load_data(&loaded->module, cubin_.data()),
          "cuModuleLoadData on device " + std::to_string(device));
  for (const std::string& entry : entries_) {
    CUfunction function = nullptr;
    d.check(d.get_function(&function, loaded->module, entry.c_str()),
            "cuModuleGetFunction(" + entry + ")");
    loaded->functions.push_back(function);
  }
  devices_[device] = std::move(loaded);
  return *devices_[device];
}

void CudaModule::launch(int kernel, int device, void* stream, LaunchShape shape,
                        const std::vector<void*>& pointers, std::span<const int64_t> sizes) const {
  const Loaded& loaded = loaded_on(device);
  Driver& d = usable_driver();
  CUcontext current = nullptr;
  d.get_current(&current);
  if (current != loaded.context) d.check(d.set_current(loaded.context), "cuCtxSetCurrent");
  // cuLaunchKernel takes the address of each parameter.
  std::vector<void*> pointer_copies = pointers;
  std::vector<long long> size_copies(sizes.begin(), sizes.end());
  std::vector<void*> parameters;
  parameters.reserve(pointer_copies.size() + size_copies.size());
  for (void*& p : pointer_copies)
    parameters.push_back(&p);
  for (long long& s : size_copies)
    parameters.push_back(&s);
  d.check(d.launch(loaded.functions.at(kernel), shape.grid, 1, 1, shape.block, 1, 1, 0,
                   static_cast<CUstream>(stream), parameters.data(), nullptr),
          "cuLaunchKernel(" + entries_.at(kernel) + ")");
}

}  // namespace kiln::cuda
