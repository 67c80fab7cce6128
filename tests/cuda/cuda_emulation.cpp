#include "cuda/cuda_emulation.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kiln::cuda_test {
namespace {

// The CUDA built-ins the generated code and its prelude use, for the host. Shared memory is a
// function-local static: blocks run one at a time, so it is the running block's.
const char* const kEmulation = R"EMU(
#define KILN_HOST_EMULATION 1
#include <math.h>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
using std::isfinite;
using std::isnan;

struct kiln_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local kiln_dim3 threadIdx, blockIdx;
inline kiln_dim3 blockDim, gridDim;
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

inline std::barrier<>* kiln_block_barrier = nullptr;
inline void __syncthreads() { kiln_block_barrier->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}

inline long long kiln_lanes[1024];
template <typename T>
T __shfl_xor_sync(unsigned, T value, int offset) {
  long long slot = 0;
  std::memcpy(&slot, &value, sizeof value);
  kiln_lanes[threadIdx.x] = slot;
  __syncthreads();
  const long long other = kiln_lanes[threadIdx.x ^ offset];
  __syncthreads();
  T result;
  std::memcpy(&result, &other, sizeof result);
  return result;
}

template <typename To, typename From>
inline To kiln_bits(From from) {
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}
inline float __int_as_float(int x) { return kiln_bits<float>(x); }
inline float __uint_as_float(unsigned x) { return kiln_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return kiln_bits<unsigned>(x); }
inline double __longlong_as_double(long long x) { return kiln_bits<double>(x); }
template <typename A, typename B>
inline auto min(A a, B b) { return a < b ? a : b; }

inline float kiln_from_half(unsigned short h) { return static_cast<float>(kiln_bits<_Float16>(h)); }
inline unsigned short kiln_to_half(float f) {
  return kiln_bits<unsigned short>(static_cast<_Float16>(f));
}

template <typename... P, size_t... I>
void kiln_call(void (*kernel)(P...), void* const* buffers, std::index_sequence<I...>) {
  kernel(static_cast<P>(buffers[I])...);
}

template <typename... P>
void kiln_emulate(void (*kernel)(P...), void* const* buffers, unsigned grid, unsigned block) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> barrier(block);
    kiln_block_barrier = &barrier;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t) {
      threads.emplace_back([=] {
        blockIdx = {b, 0, 0};
        threadIdx = {t, 0, 0};
        kiln_call(kernel, buffers, std::index_sequence_for<P...>{});
      });
    }
    for (auto& thread : threads) thread.join();
  }
}
)EMU";

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "g++";
}

}  // namespace

std::string emulation_unavailable_reason() {
  const std::string command = compiler() + " --version > /dev/null 2>&1";
  return std::system(command.c_str()) == 0 ? "" : "no host C++ compiler (" + compiler() + ")";
}

EmulatedModule::EmulatedModule(const codegen::cuda::CudaModuleSource& module) : module_(module) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kiln_emulation_" + std::to_string(getpid()) + "_" +
                    std::to_string(reinterpret_cast<uintptr_t>(this)));
  std::filesystem::create_directories(dir);
  std::string source = std::string(kEmulation) + module.source;
  for (size_t i = 0; i < module.kernels.size(); ++i) {
    source += "\nextern \"C\" void kiln_emulate_" + std::to_string(i) +
              "(void* const* buffers, unsigned grid, unsigned block) {\n  kiln_emulate(" +
              module.kernels[i].entry + ", buffers, grid, block);\n}\n";
  }
  const std::string cpp = (dir / "module.cpp").string();
  path_ = (dir / "module.so").string();
  const std::string log = (dir / "compile.log").string();
  std::ofstream(cpp) << source;
  const std::string command = compiler() + " -std=c++20 -O1 -shared -fPIC -pthread -w -o " +
                              path_ + " " + cpp + " > " + log + " 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::ifstream in(log);
    std::string text(std::istreambuf_iterator<char>(in), {});
    throw std::runtime_error("the emulated CUDA module did not compile (" + cpp + "):\n" +
                             text.substr(0, 4000));
  }
  library_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  std::filesystem::remove_all(dir);
}

EmulatedModule::~EmulatedModule() {
  if (library_) dlclose(library_);
}

void EmulatedModule::launch(int index, const std::vector<void*>& buffers, unsigned grid) {
  using Launch = void (*)(void* const*, unsigned, unsigned);
  const std::string name = "kiln_emulate_" + std::to_string(index);
  auto function = reinterpret_cast<Launch>(dlsym(library_, name.c_str()));
  if (!function) throw std::runtime_error("no " + name + " in the emulated module");
  const auto& schedule = module_.kernels.at(index).schedule;
  std::vector<void*> arguments = buffers;
  std::vector<unsigned char> workspace(schedule.workspace_bytes, 0);
  if (schedule.workspace_bytes > 0) arguments.push_back(workspace.data());
  if (schedule.blocks == 0) return;
  function(arguments.data(), grid, static_cast<unsigned>(schedule.block));
}

}  // namespace kiln::cuda_test
