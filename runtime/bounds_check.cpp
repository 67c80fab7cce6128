#include "runtime/bounds_check.h"

#include <ATen/ATen.h>

#include "kiln/error.h"
#include "passes/base/environment.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln {
namespace {

constexpr uint8_t kPoison = 0xFF;

// The first byte of `band` (a CPU byte tensor) that is not poison, or -1.
int64_t first_changed(const at::Tensor& band) {
  const auto* bytes = band.data_ptr<uint8_t>();
  for (int64_t i = 0; i < band.numel(); ++i) {
    if (bytes[i] != kPoison) return i;
  }
  return -1;
}

}  // namespace

bool bounds_checked() {
  return environment().check_bounds;
}

at::Tensor GuardedBuffers::allocate(const ir::TensorType& type, c10::Device device,
                                    std::string what) {
  const int64_t bytes = type.storage_bytes();
  at::Tensor all = at::full({kGuardBytes + bytes + kGuardBytes}, kPoison,
                            at::TensorOptions().dtype(at::kByte).device(device));
  const at::ScalarType dtype = to_aten_dtype(type.dtype);
  at::Tensor buffer =
      at::empty({0}, at::TensorOptions().dtype(dtype).device(device))
          .set_(all.storage(), kGuardBytes / c10::elementSize(dtype), type.sizes, type.strides);
  buffers_.push_back({all, bytes, std::move(what)});
  return buffer;
}

void GuardedBuffers::check_after(const std::string& step) const {
  for (const Guarded& g : buffers_) {
    const at::Tensor before = g.bytes.narrow(0, 0, kGuardBytes).cpu();
    const at::Tensor after = g.bytes.narrow(0, kGuardBytes + g.buffer_bytes, kGuardBytes).cpu();
    const int64_t under = first_changed(before.flip(0));
    const int64_t over = first_changed(after);
    if (under < 0 && over < 0) continue;
    // The changed byte nearest the buffer: 1 is the byte right after (before) it.
    const std::string where = over >= 0
                                  ? "at byte " + std::to_string(over + 1) + " past its end"
                                  : "at byte " + std::to_string(under + 1) + " before its start";
    throw Error(ErrorKind::Internal,
                "KILN_DEBUG=bounds: after step " + step + ", the guard band of " + g.what + " (" +
                    std::to_string(g.buffer_bytes) + " bytes) was written " + where);
  }
}

}  // namespace kiln
