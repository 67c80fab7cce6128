#include "backend/codegen/cuda/compile_cuda_kernels.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>

#include "backend/codegen/cuda/cuda_emitter.h"
#include "kiln/error.h"
#include "passes/kernel/size_terms.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/nvrtc.h"

namespace kiln::codegen::cuda {
namespace {

/// Multiprocessors of a device, asked once.
int multiprocessors(int device) {
  static std::mutex mutex;
  static std::map<int, int> counts;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = counts.find(device);
  if (found == counts.end())
    found = counts.emplace(device, kiln::cuda::multiprocessor_count(device)).first;
  return found->second;
}

/// Whether `schedule` (a size-generic kernel's, taken at its example binding) is the one the
/// collapsed kernel `generic` gets at these size inputs.
bool schedule_holds_at(const kernel::Kernel& generic, const CudaSchedule& schedule,
                       std::span<const int64_t> sizes) {
  return kernel::guards_hold(schedule.guards, kernel::bind_sizes(generic, sizes));
}

class CudaKernel final : public DeviceKernel {
 public:
  CudaKernel(std::shared_ptr<const kiln::cuda::CudaModule> module, int index, CudaSchedule schedule,
             std::optional<kernel::Kernel> generic)
      : module_(std::move(module)),
        index_(index),
        schedule_(std::move(schedule)),
        generic_(std::move(generic)) {}

  std::shared_ptr<const DeviceKernel> at_sizes(std::span<const int64_t> sizes) const override {
    if (!generic_) return nullptr;
    const kernel::Kernel bound = kernel::bind_sizes(*generic_, sizes);  // checks the count
    // Its vector width, index type and row cache are right only where the guards hold.
    if (!kernel::guards_hold(schedule_.guards, bound))
      throw Error(ErrorKind::Unsupported,
                  "CUDA kernel " + generic_->name + ": its schedule does not hold at these sizes");
    auto at = std::make_shared<CudaKernel>(module_, index_, schedule_, std::nullopt);
    at->schedule_.blocks = cuda_blocks(bound, schedule_);
    at->sizes_.assign(sizes.begin(), sizes.end());
    return at;
  }

  void launch(const std::vector<void*>& buffers, int device, void* stream) const override {
    // A size-generic kernel launches bound to a binding (at_sizes): its code reads the sizes.
    if (generic_)
      throw Error(ErrorKind::Internal, "CUDA kernel " + generic_->name +
                                           " is size-generic and was launched without its sizes");
    if (schedule_.blocks == 0) return;  // nothing to compute (a zero-size dimension)
    // Grid-stride loops: two waves of fully occupied multiprocessors are plenty.
    const int64_t resident = int64_t{2} * multiprocessors(device) * (2048 / schedule_.block);
    const int64_t grid = std::min(schedule_.blocks, std::max<int64_t>(resident, 1));
    // The phases of a split row, in stream order: each reads what the previous one left.
    for (int phase = 0; phase < schedule_.phases; ++phase) {
      module_->launch(index_ + phase, device, stream,
                      {static_cast<unsigned>(grid), static_cast<unsigned>(schedule_.block)},
                      buffers, sizes_);
    }
  }

  int64_t workspace_bytes() const override { return schedule_.workspace_bytes; }

 private:
  std::shared_ptr<const kiln::cuda::CudaModule> module_;
  int index_;
  CudaSchedule schedule_;
  std::optional<kernel::Kernel> generic_;  // collapsed; set until bound by at_sizes
  std::vector<int64_t> sizes_;             // the bound kernel's size inputs
};

void dump(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

std::string cuda_codegen_unavailable_reason() {
  std::string why = kiln::cuda::nvrtc_unavailable_reason();
  if (why.empty()) why = kiln::cuda::driver_unavailable_reason();
  return why;
}

CompiledCudaKernels compile_cuda_kernels(const std::vector<kernel::Kernel>& kernels,
                                         const CudaCodegenOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (const std::string why = cuda_codegen_unavailable_reason(); !why.empty()) {
    throw Error(ErrorKind::Unsupported, "CUDA code generation is unavailable: " + why);
  }
  // A plan's repeated layers lower to the same kernels: each is compiled once.
  const kernel::DistinctKernels distinct = kernel::distinct_kernels(kernels);
  const CudaModuleSource module = emit_cuda_module(distinct.kernels);
  const int arch = options.arch ? options.arch : kiln::cuda::compute_capability(options.device);
  const std::string name = kernels.empty() ? "kiln" : kernels.front().name;
  if (!options.dump_prefix.empty()) dump(options.dump_prefix + ".cu", module.source);
  auto program = kiln::cuda::nvrtc_compile_cached(module.source, arch, name);
  if (!options.dump_prefix.empty()) dump(options.dump_prefix + ".ptx", program->ptx);
  std::vector<std::string> entries;
  std::vector<int> first_entry;  // per kernel: its phase 0 in `entries`
  for (const auto& k : module.kernels) {
    first_entry.push_back(static_cast<int>(entries.size()));
    for (int phase = 0; phase < k.schedule.phases; ++phase)
      entries.push_back(phase_entry(k.entry, phase));
  }
  auto loaded = std::make_shared<const kiln::cuda::CudaModule>(program->cubin, entries);
  std::vector<std::shared_ptr<CudaKernel>> loaded_kernels;
  for (size_t i = 0; i < module.kernels.size(); ++i) {
    loaded_kernels.push_back(std::make_shared<CudaKernel>(
        loaded, first_entry[i], module.kernels[i].schedule, module.kernels[i].generic));
  }
  CompiledCudaKernels compiled;
  for (size_t d : distinct.index) {
    compiled.kernels.push_back(loaded_kernels.at(d));
    const CudaKernelSource& source = module.kernels.at(d);
    auto& holds = compiled.schedule_holds.emplace_back();
    if (!source.generic) continue;
    holds = [generic = *source.generic, schedule = source.schedule,
             inputs = source.generic->size_inputs.size()](const int64_t* sizes) {
      return schedule_holds_at(generic, schedule, std::span<const int64_t>(sizes, inputs));
    };
  }
  compiled.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return compiled;
}

}  // namespace kiln::codegen::cuda
