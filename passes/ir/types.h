// Element types, devices and tensor types of the graph IR. No torch here: the runtime's tensor
// bridge maps these to ATen's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::ir {

enum class DType : uint8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128,
};

/// Short printed name: b8 u8 i8 i16 i32 i64 f16 bf16 f32 f64 c64 c128.
const char* dtype_name(DType dtype);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(const std::string& name);
/// Bytes per element.
int64_t dtype_size(DType dtype);
bool is_floating(DType dtype);

enum class DeviceKind : uint8_t { CPU, CUDA, Meta };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = -1;  // -1: the current device of that kind
  bool operator==(const Device&) const = default;
};

/// "cpu", "cuda", "cuda:1", "meta".
std::string device_name(const Device& device);
std::optional<Device> parse_device(const std::string& name);

/// A tensor with static shape: what every Value of the graph IR carries.
struct TensorType {
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements, same rank as sizes
  Device device;

  bool operator==(const TensorType&) const = default;
  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  /// True when strides are the row-major strides of sizes (size-1 dims may have any stride).
  bool is_contiguous() const;
  /// True when no two elements share memory and the elements fill [0, numel) without gaps
  /// (some permutation of a contiguous layout): such a tensor can live in a planned buffer.
  bool is_non_overlapping_and_dense() const;
  /// Bytes from the first to one past the last element addressed by sizes and strides.
  int64_t storage_bytes() const;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);
TensorType make_contiguous(DType dtype, std::vector<int64_t> sizes, Device device = {});

/// Printed form, e.g. "f32[2,3]", "f32[3,2]{1,3}" (strides shown only when not contiguous),
/// "i64[]@cuda:0".
std::string type_string(const TensorType& type);

}  // namespace kiln::ir
