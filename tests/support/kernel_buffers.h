// Kernel buffers as bytes, for the tests of the code generators (torch-free, gtest-free): element
// values written and read per dtype, and how many elements a buffer needs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "passes/kernel/kernel.h"
#include "passes/kernel/scalar_convert.h"

namespace kiln::testing {

/// Writes `v` at `p` as a `t` element (integers truncate, bool is v != 0; integer dtypes need a
/// finite v).
inline void put_element(kernel::DType t, uint8_t* p, double v) {
  using kernel::DType;
  auto as = [&](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DType::Float32:
      return as(static_cast<float>(v));
    case DType::Float64:
      return as(v);
    case DType::Float16:
      return as(kernel::half_from_float(static_cast<float>(v)));
    case DType::BFloat16:
      return as(kernel::bfloat16_from_float(static_cast<float>(v)));
    case DType::Bool:
      return as(static_cast<uint8_t>(v != 0));
    case DType::Int64:
      return as(static_cast<int64_t>(v));
    case DType::Int32:
      return as(static_cast<int32_t>(v));
    case DType::Int16:
      return as(static_cast<int16_t>(v));
    case DType::Int8:
      return as(static_cast<int8_t>(v));
    default:
      return as(static_cast<uint8_t>(static_cast<int64_t>(v)));  // uint8
  }
}

/// The `t` element at `p` as a double.
inline double get_element(kernel::DType t, const uint8_t* p) {
  using kernel::DType;
  auto as = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  uint16_t bits16 = 0;
  std::memcpy(&bits16, p, sizeof bits16);
  switch (t) {
    case DType::Float32:
      return as(float{});
    case DType::Float64:
      return as(double{});
    case DType::Float16:
      return kernel::float_from_half(bits16);
    case DType::BFloat16:
      return kernel::float_from_bfloat16(bits16);
    case DType::Int64:
      return as(int64_t{});
    case DType::Int32:
      return as(int32_t{});
    case DType::Int16:
      return as(int16_t{});
    case DType::Int8:
      return as(int8_t{});
    default:
      return as(uint8_t{});  // uint8, bool
  }
}

/// Elements a buffer needs so that every map of the kernel on it stays inside (at least 1).
inline int64_t buffer_elements(const kernel::Kernel& k, int buffer) {
  int64_t n = 1;
  auto visit = [&](const kernel::IndexMap& m) {
    if (m.buffer != buffer) return;
    int64_t last = m.offset;
    for (int d = 0; d < k.rank(); ++d)
      last += std::max<int64_t>(k.sizes[d] - 1, 0) * m.strides[d];
    n = std::max(n, last + 1);
  };
  for (const auto& e : k.exprs)
    if (e.op == kernel::Op::Load) visit(e.map);
  for (const auto& s : k.stores)
    visit(s.map);
  return n;
}

}  // namespace kiln::testing
