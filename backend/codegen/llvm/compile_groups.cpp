#include "backend/codegen/llvm/compile_groups.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>

#include "runtime/jit/code_bundle.h"

namespace kiln::codegen {
namespace {

/// What a kernel costs to compile, roughly: its expressions, once more for every pass over a
/// row a reduction adds (each pass is a loop nest of its own).
size_t compile_cost(const kernel::Kernel& k) {
  size_t passes = 1;
  for (const kernel::Expr& e : k.exprs)
    passes += e.op == kernel::Op::Reduce;
  return (k.exprs.size() + k.stores.size()) * passes;
}

}  // namespace

std::vector<std::vector<size_t>> compile_groups(const std::vector<kernel::Kernel>& kernels,
                                                int threads) {
  const size_t count = std::max<size_t>(
      1, std::min<size_t>(std::max(threads, 1), kernels.size() / kMinKernelsPerModule));
  std::vector<std::vector<size_t>> groups(count);
  // The costliest first, each to the least loaded group (longest processing time first).
  std::vector<size_t> order(kernels.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return compile_cost(kernels[a]) > compile_cost(kernels[b]);
  });
  std::vector<size_t> load(count, 0);
  for (size_t i : order) {
    const size_t g = std::min_element(load.begin(), load.end()) - load.begin();
    groups[g].push_back(i);
    load[g] += compile_cost(kernels[i]);
  }
  for (auto& group : groups)
    std::sort(group.begin(), group.end());
  std::erase_if(groups, [](const std::vector<size_t>& g) { return g.empty(); });
  return groups;
}

void run_concurrently(size_t n, const std::function<void(size_t)>& work) {
  std::exception_ptr first;
  std::mutex mutex;
  auto guarded = [&](size_t i) {
    try {
      work(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!first) first = std::current_exception();
    }
  };
  // A compile under a code bundle (a package's) looks modules up in it on every thread.
  jit::CodeBundle* bundle = jit::code_bundle_in_use();
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) {
    threads.emplace_back([&guarded, bundle, i] {
      jit::UseCodeBundle use(bundle);
      guarded(i);
    });
  }
  if (n > 0) guarded(0);
  for (std::thread& t : threads)
    t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace kiln::codegen
