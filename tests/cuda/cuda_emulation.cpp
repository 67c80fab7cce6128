#include "cuda/cuda_emulation.h"

#include <dlfcn.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "passes/kernel/interpreter.h"
#include "passes/kernel/printer.h"
#include "passes/kernel/size_guards.h"
#include "passes/kernel/size_terms.h"
#include "tests/support/kernel_buffers.h"

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
#include <type_traits>
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

// Float math as the reference interpreter does it: in double, rounded once. Kernels without a
// reduction must then match the interpreter bit for bit; what is left to compare loosely is the
// order of sums.
inline float kiln_float_math(double value) { return static_cast<float>(value); }
#define expf(x) kiln_float_math(exp(static_cast<double>(x)))
#define logf(x) kiln_float_math(log(static_cast<double>(x)))
#define sqrtf(x) kiln_float_math(sqrt(static_cast<double>(x)))
#define erff(x) kiln_float_math(erf(static_cast<double>(x)))
#define tanhf(x) kiln_float_math(tanh(static_cast<double>(x)))
inline float kiln_sigmoid(float x) { return kiln_float_math(1.0 / (1.0 + exp(-static_cast<double>(x)))); }
inline double kiln_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
inline float kiln_rsqrt(float x) { return kiln_float_math(1.0 / sqrt(static_cast<double>(x))); }
inline double kiln_rsqrt(double x) { return 1.0 / sqrt(x); }

inline float kiln_from_half(unsigned short h) { return static_cast<float>(kiln_bits<_Float16>(h)); }
inline unsigned short kiln_to_half(float f) {
  return kiln_bits<unsigned short>(static_cast<_Float16>(f));
}

// A buffer's argument is its pointer; a size's points at its value.
template <typename P>
P kiln_argument(void* argument) {
  if constexpr (std::is_pointer_v<P>) {
    return static_cast<P>(argument);
  } else {
    return *static_cast<const P*>(argument);
  }
}

template <typename... P, size_t... I>
void kiln_call(void (*kernel)(P...), void* const* buffers, std::index_sequence<I...>) {
  kernel(kiln_argument<P>(buffers[I])...);
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

using kernel::DType;
using kernel::Kernel;
using kernel::Op;

namespace {

double unit_roundoff(DType t) {
  switch (t) {
    case DType::Float64:
      return 0x1p-53;
    case DType::Float16:
      return 0x1p-11;
    case DType::BFloat16:
      return 0x1p-8;
    default:
      return 0x1p-24;
  }
}

/// The same kernel with every float reduction's result scaled by (1 + n u) (n elements per row,
/// u the unit roundoff of its dtype), about the most another summation order can change a sum of
/// like-signed terms: how far that moves an output measures how much the sums' rounding is
/// amplified on the way to it (a sum close to 1 under a log, then a division by the result).
Kernel sums_nudged(const Kernel& k) {
  Kernel nudged = k;
  nudged.exprs.clear();
  kernel::KernelBuilder b(nudged);
  std::vector<int> moved(k.exprs.size());
  for (size_t i = 0; i < k.exprs.size(); ++i) {
    kernel::Expr e = k.exprs[i];
    for (int& arg : e.args)
      arg = moved[arg];
    nudged.exprs.push_back(e);
    moved[i] = static_cast<int>(nudged.exprs.size()) - 1;
    if (e.op == Op::Reduce && ir::is_floating(e.dtype)) {
      const double scale = 1 + static_cast<double>(k.row_size()) * unit_roundoff(e.dtype);
      moved[i] = b.binary(Op::Mul, moved[i], b.constant(scale, e.dtype), e.dtype);
    }
  }
  for (auto& s : nudged.stores)
    s.value = moved[s.value];
  return nudged;
}

}  // namespace

Bytes random_buffer(DType t, int64_t n, std::mt19937_64& rng) {
  Bytes bytes(n * ir::dtype_size(t));
  std::uniform_real_distribution<double> real(-3, 3);
  std::uniform_int_distribution<int> integer(t == DType::UInt8 ? 0 : -60, 60);
  const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0};
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (t == DType::Bool) {
      v = integer(rng) & 1;
    } else if (!ir::is_floating(t)) {
      v = integer(rng);
    } else {
      v = i % 97 < 6 && n > 97 ? specials[i % 97] : real(rng);
    }
    testing::put_element(t, bytes.data() + i * ir::dtype_size(t), v);
  }
  return bytes;
}

namespace {

/// Runs kernel `index` of `emulated` (at `sizes`, for a size-generic one) and `reference` (the
/// kernel at those sizes) through the interpreter on the same random inputs; "" when every output
/// agrees, else the first difference (tolerances: emulation_differences).
std::string compare_emulated(const Kernel& reference, EmulatedModule& emulated, int index,
                             std::span<const int64_t> sizes, std::mt19937_64& rng) {
  const Kernel& k = reference;
  std::vector<Bytes> want, got;
  double max_input = 0;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const DType t = k.buffers[b].dtype;
    const int64_t n = testing::buffer_elements(k, static_cast<int>(b));
    want.push_back(k.buffers[b].is_output ? Bytes(n * ir::dtype_size(t), 0xAB)
                                          : random_buffer(t, n, rng));
    got.push_back(want.back());
    if (!k.buffers[b].is_output) {
      for (int64_t i = 0; i < n; ++i) {
        const double v = testing::get_element(t, want.back().data() + i * ir::dtype_size(t));
        if (std::isfinite(v)) max_input = std::max(max_input, std::fabs(v));
      }
    }
  }
  std::vector<void*> want_pointers, got_pointers;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    want_pointers.push_back(want[b].data());
    got_pointers.push_back(got[b].data());
  }
  kernel::interpret(k, want_pointers);
  // For reducing kernels, the reference again with the sums nudged (sums_nudged): how far
  // that moves an element bounds how far the threads' summation order may move it.
  std::vector<Bytes> nudged;
  if (k.reduce_rank > 0) {
    std::vector<void*> nudged_pointers;
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      nudged.push_back(want[b]);
      nudged_pointers.push_back(nudged[b].data());
    }
    kernel::interpret(sums_nudged(k), nudged_pointers);
  }
  // Two blocks: every grid-stride loop goes round more than once.
  emulated.launch(index, got_pointers, 2, sizes);
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].is_output) continue;
    const DType t = k.buffers[b].dtype;
    const int64_t size = ir::dtype_size(t);
    const double u = unit_roundoff(t);
    const double row = k.reduce_rank ? static_cast<double>(k.row_size()) : 0;
    for (int64_t i = 0; i < static_cast<int64_t>(want[b].size()) / size; ++i) {
      const double w = testing::get_element(t, want[b].data() + i * size);
      const double g = testing::get_element(t, got[b].data() + i * size);
      bool same = w == g || (std::isnan(w) && std::isnan(g));
      if (!same && row > 0 && ir::is_floating(t) && std::isfinite(w) && std::isfinite(g)) {
        // Sums in another order: the rounding of each partial sum, carried to the result.
        const double tolerance =
            2 * row * std::max(u, 0x1p-24) * std::max(max_input, 1.0) * std::max(1.0, std::fabs(w));
        const double moved = testing::get_element(t, nudged[b].data() + i * size);
        same = !std::isfinite(moved) || std::fabs(w - g) <= tolerance + 2 * std::fabs(moved - w);
      }
      if (!same) {
        return "kernel " + std::to_string(index) + " buffer b" + std::to_string(b) + " element " +
               std::to_string(i) + ": got " + std::to_string(g) + ", want " + std::to_string(w) +
               "\n" + kernel::print_kernel(k);
      }
    }
  }
  return "";
}

}  // namespace

std::string emulation_differences(const std::vector<Kernel>& kernels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto module = codegen::cuda::emit_cuda_module(kernels);
  EmulatedModule emulated(module);
  std::string report;
  for (size_t index = 0; index < kernels.size(); ++index)
    report += compare_emulated(kernels[index], emulated, static_cast<int>(index), {}, rng);
  return report;
}

std::string emulation_differences_at(const Kernel& generic,
                                     const std::vector<std::vector<int64_t>>& bindings,
                                     int* bindings_run, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto module = codegen::cuda::emit_cuda_module({generic});
  if (!module.kernels.at(0).generic)
    throw std::invalid_argument("emulation_differences_at: " + generic.name +
                                " was not emitted size-generic");
  const codegen::cuda::CudaKernelSource& source = module.kernels[0];
  EmulatedModule emulated(module);
  std::string report;
  int run = 0;
  for (const std::vector<int64_t>& sizes : bindings) {
    if (!kernel::guards_hold(source.schedule.guards, kernel::bind_sizes(*source.generic, sizes)))
      continue;  // a shape class never launches it there
    std::string at = compare_emulated(kernel::bind_sizes(generic, sizes), emulated, 0, sizes, rng);
    if (!at.empty()) {
      std::string binding;
      for (int64_t v : sizes)
        binding += " " + std::to_string(v);
      report += "at sizes" + binding + ": " + at;
    }
    ++run;
  }
  if (bindings_run) *bindings_run = run;
  return report;
}

std::string emulation_unavailable_reason() {
  const std::string command = compiler() + " --version > /dev/null 2>&1";
  return std::system(command.c_str()) == 0 ? "" : "no host C++ compiler (" + compiler() + ")";
}

EmulatedModule::EmulatedModule(const codegen::cuda::CudaModuleSource& module) : module_(module) {
  // A path of its own for every module: dlopen of a path whose library is still loaded (dlclose
  // may keep a library with unique symbols) would hand back the earlier module's code.
  static std::atomic<uint64_t> modules{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kiln_emulation_" + std::to_string(getpid()) + "_" + std::to_string(modules++));
  std::filesystem::create_directories(dir);
  std::string source = std::string(kEmulation) + module.source;
  for (size_t i = 0; i < module.kernels.size(); ++i) {
    for (int phase = 0; phase < module.kernels[i].schedule.phases; ++phase) {
      source += "\nextern \"C\" void kiln_emulate_" + std::to_string(i) + "_" +
                std::to_string(phase) +
                "(void* const* buffers, unsigned grid, unsigned block) {\n  kiln_emulate(" +
                codegen::cuda::phase_entry(module.kernels[i].entry, phase) +
                ", buffers, grid, block);\n}\n";
    }
  }
  const std::string cpp = (dir / "module.cpp").string();
  path_ = (dir / "module.so").string();
  const std::string log = (dir / "compile.log").string();
  std::ofstream(cpp) << source;
  const std::string command = compiler() + " -std=c++20 -O1 -shared -fPIC -pthread -w -o " + path_ +
                              " " + cpp + " > " + log + " 2>&1";
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

void EmulatedModule::launch(int index, const std::vector<void*>& buffers, unsigned grid,
                            std::span<const int64_t> sizes) {
  using Launch = void (*)(void* const*, unsigned, unsigned);
  const codegen::cuda::CudaKernelSource& source = module_.kernels.at(index);
  const auto& schedule = source.schedule;
  if (source.generic.has_value() != !sizes.empty())
    throw std::invalid_argument("a size-generic kernel, and it alone, launches with its sizes");
  std::vector<void*> arguments = buffers;
  std::vector<unsigned char> workspace(schedule.workspace_bytes, 0);
  if (schedule.workspace_bytes > 0) arguments.push_back(workspace.data());
  std::vector<long long> size_values(sizes.begin(), sizes.end());
  for (long long& value : size_values)
    arguments.push_back(&value);
  const int64_t blocks = source.generic ? codegen::cuda::cuda_blocks(
                                              kernel::bind_sizes(*source.generic, sizes), schedule)
                                        : schedule.blocks;
  if (blocks == 0) return;
  for (int phase = 0; phase < schedule.phases; ++phase) {
    const std::string name = "kiln_emulate_" + std::to_string(index) + "_" + std::to_string(phase);
    auto function = reinterpret_cast<Launch>(dlsym(library_, name.c_str()));
    if (!function) throw std::runtime_error("no " + name + " in the emulated module");
    function(arguments.data(), grid, static_cast<unsigned>(schedule.block));
  }
  // A split kernel leaves its counters (the workspace's last 4 bytes per row) zeroed for the
  // next call.
  if (schedule.slices > 1) {
    const int64_t rows = schedule.blocks / schedule.slices;
    const auto counters = workspace.end() - rows * 4;
    if (std::any_of(counters, workspace.end(), [](unsigned char c) { return c != 0; }))
      throw std::runtime_error("a split kernel left a row counter non-zero");
  }
}

}  // namespace kiln::cuda_test
