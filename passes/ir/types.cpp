#include "passes/ir/types.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace kiln::ir {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  int64_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "b8", 1},     {DType::UInt8, "u8", 1},      {DType::Int8, "i8", 1},
    {DType::Int16, "i16", 2},   {DType::Int32, "i32", 4},     {DType::Int64, "i64", 8},
    {DType::Float16, "f16", 2}, {DType::BFloat16, "bf16", 2}, {DType::Float32, "f32", 4},
    {DType::Float64, "f64", 8}, {DType::Complex64, "c64", 8}, {DType::Complex128, "c128", 16},
};

const DTypeInfo& info(DType dtype) {
  return kDTypes[static_cast<int>(dtype)];
}

}  // namespace

const char* dtype_name(DType dtype) {
  return info(dtype).name;
}
int64_t dtype_size(DType dtype) {
  return info(dtype).size;
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

bool is_floating(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Float32 ||
         dtype == DType::Float64;
}

std::string device_name(const Device& device) {
  std::string name = device.kind == DeviceKind::CPU    ? "cpu"
                     : device.kind == DeviceKind::CUDA ? "cuda"
                                                       : "meta";
  if (device.index >= 0) name += ":" + std::to_string(device.index);
  return name;
}

std::optional<Device> parse_device(const std::string& name) {
  Device device;
  std::string kind = name;
  auto colon = name.find(':');
  if (colon != std::string::npos) {
    kind = name.substr(0, colon);
    std::string index = name.substr(colon + 1);
    if (index.empty() || index.size() > 4 ||
        !std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    device.index = std::stoi(index);
  }
  if (kind == "cpu") {
    device.kind = DeviceKind::CPU;
  } else if (kind == "cuda") {
    device.kind = DeviceKind::CUDA;
  } else if (kind == "meta") {
    device.kind = DeviceKind::Meta;
  } else {
    return std::nullopt;
  }
  return device;
}

int64_t TensorType::numel() const {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

TensorType make_contiguous(DType dtype, std::vector<int64_t> sizes, Device device) {
  TensorType type;
  type.dtype = dtype;
  type.strides = contiguous_strides(sizes);
  type.sizes = std::move(sizes);
  type.device = device;
  return type;
}

bool TensorType::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool TensorType::is_non_overlapping_and_dense() const {
  if (numel() == 0) return true;
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  // Innermost first: sort dims by stride, size-1 dims do not matter.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] == 1 || sizes[b] == 1) return sizes[a] != 1 && sizes[b] == 1;
    return strides[a] < strides[b];
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

int64_t TensorType::storage_bytes() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    last += (sizes[i] - 1) * strides[i];
  return (last + 1) * dtype_size(dtype);
}

std::string type_string(const TensorType& type) {
  std::ostringstream out;
  out << dtype_name(type.dtype) << "[";
  for (size_t i = 0; i < type.sizes.size(); ++i)
    out << (i ? "," : "") << type.sizes[i];
  out << "]";
  if (type.strides != contiguous_strides(type.sizes)) {
    out << "{";
    for (size_t i = 0; i < type.strides.size(); ++i)
      out << (i ? "," : "") << type.strides[i];
    out << "}";
  }
  if (!(type.device == Device{})) out << "@" << device_name(type.device);
  return out.str();
}

}  // namespace kiln::ir
