#include "backend/codegen/llvm/kernel_cache.h"

#include "passes/kernel/printer.h"

namespace kiln::codegen {
namespace {

// The printed kernel without its name, its schedule and the variant: equal for kernels that
// compile to the same code. Entries are still compared with same_computation, so the text only
// has to be a hash.
std::string text(const CacheKey& key) {
  const CodeVariant& variant = key.variant;
  kernel::Kernel unnamed = key.kernel;
  unnamed.name.clear();
  return kernel::print_kernel(unnamed) + "|" + key.schedule + "|" +
         std::to_string(variant.target.vector_bits) +
         (variant.avx512_math ? "|avx512|" : "|generic|") +
         std::to_string(variant.target.stream_bytes) +
         (variant.target.one_pass_moments ? "" : "|two-pass");
}

}  // namespace

void run_compiled_kernel(const CompiledKernel& kernel, std::vector<void*> buffers,
                         const std::vector<int64_t>& cuts, const int64_t* sizes) {
  std::vector<int64_t> workspace;
  if (kernel.finish) add_workspace(*kernel.finish, workspace, buffers);
  if (cuts.empty()) {
    const int64_t range = kernel.launch_at ? kernel.launch_at(sizes).range : kernel.range;
    kernel.function(buffers.data(), sizes, 0, range);
  } else {
    for (size_t k = 0; k + 1 < cuts.size(); ++k)
      kernel.function(buffers.data(), sizes, cuts[k], cuts[k + 1]);
  }
  if (kernel.finish) run_finish(*kernel.finish, buffers);
}

KernelCache& KernelCache::instance() {
  // Never destroyed: a plan released during process exit may still reach it.
  static KernelCache* cache = new KernelCache();
  return *cache;
}

std::optional<CachedKernel> KernelCache::find(const CacheKey& key) {
  const std::string k = text(key);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, last] = entries_.equal_range(k);
  for (auto it = first; it != last; ++it) {
    const Entry& e = it->second;
    if (!(e.key.variant == key.variant) || e.key.schedule != key.schedule ||
        !kernel::same_computation(e.key.kernel, key.kernel)) {
      continue;
    }
    if (std::shared_ptr<jit::JitModule> code = e.code.lock()) return CachedKernel{code, e.compiled};
  }
  return std::nullopt;
}

void KernelCache::add(const CacheKey& key, const std::shared_ptr<jit::JitModule>& code,
                      const CompiledKernel& compiled) {
  std::string k = text(key);
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.emplace(std::move(k), Entry{key, code, compiled});
  // Sweeping when the table has doubled keeps the cost per add constant on average.
  if (entries_.size() >= 2 * size_after_sweep_ + 64) drop_unloaded();
}

void KernelCache::drop_unloaded() {
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.code.expired() ? entries_.erase(it) : std::next(it);
  size_after_sweep_ = entries_.size();
}

}  // namespace kiln::codegen
