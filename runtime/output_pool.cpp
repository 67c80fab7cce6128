#include "runtime/output_pool.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/alloc_cpu.h>

#include <deque>
#include <mutex>

#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

constexpr size_t kPage = 4096;

struct Block {
  void* data;
  size_t bytes;
};

class OutputPool final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes < kPooledBytes) return c10::GetCPUAllocator()->allocate(bytes);
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    void* data = take(rounded);
    if (!data) data = c10::alloc_cpu(rounded);
    return {data, new Block{data, rounded}, &OutputPool::release, c10::Device(c10::kCPU)};
  }

  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }

  size_t free_bytes() {
    std::lock_guard lock(mutex_);
    return free_bytes_;
  }

 private:
  // A freed block of exactly this size, the most recently freed first (its pages are the likeliest
  // to be in the caches).
  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      if (it->bytes != bytes) continue;
      void* data = it->data;
      free_bytes_ -= bytes;
      free_.erase(std::next(it).base());
      return data;
    }
    return nullptr;
  }

  // The deleter of every pooled storage: on whichever thread drops its last reference.
  static void release(void* context);

  std::mutex mutex_;
  std::deque<Block> free_;  // oldest first
  size_t free_bytes_ = 0;
};

OutputPool& pool() {
  // Never destroyed: storages made from it may outlive every static (a tensor held in a global).
  static auto* instance = new OutputPool();
  return *instance;
}

void OutputPool::release(void* context) {
  std::unique_ptr<Block> block(static_cast<Block*>(context));
  OutputPool& self = pool();
  std::vector<void*> evicted;
  {
    std::lock_guard lock(self.mutex_);
    self.free_.push_back(*block);
    self.free_bytes_ += block->bytes;
    while (self.free_bytes_ > kPoolCapacityBytes) {
      self.free_bytes_ -= self.free_.front().bytes;
      evicted.push_back(self.free_.front().data);
      self.free_.pop_front();
    }
  }
  for (void* data : evicted)
    c10::free_cpu(data);
}

}  // namespace

at::Tensor pooled_empty(const ir::TensorType& type) {
  const at::ScalarType dtype = to_aten_dtype(type.dtype);
  const auto bytes = static_cast<size_t>(type.storage_bytes());
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, &pool(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                   c10::scalarTypeToTypeMeta(dtype));
  impl->set_sizes_and_strides(type.sizes, type.strides);
  return at::Tensor(std::move(impl));
}

c10::Allocator* output_pool() {
  return &pool();
}

size_t output_pool_free_bytes() {
  return pool().free_bytes();
}

}  // namespace kiln
