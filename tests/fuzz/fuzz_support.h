// What the fuzzer's generator and its error bounds share: dtype facts, and calling an ATen op
// from the graph IR's attributes. Header-only.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "runtime/bridge/tensor_bridge.h"

namespace kiln::fuzz {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// --- Dtypes ------------------------------------------------------------------------------------

inline bool is_float(at::ScalarType t) {
  return at::isFloatingType(t);
}

// Per float dtype: unit roundoff, largest finite value, smallest normal value, and the relative
// tolerance floor of the comparison. Other dtypes are exact: 0, inf, 0, 0.
struct FloatInfo {
  at::ScalarType type;
  double u, max, min_normal, rtol;
};

inline const FloatInfo& float_info(at::ScalarType t) {
  static const FloatInfo kInfo[] = {
      {at::kDouble, 0x1p-53, std::numeric_limits<double>::max(), 0x1p-1022, 1e-12},
      {at::kFloat, 0x1p-24, std::numeric_limits<float>::max(), 0x1p-126, 1e-5},
      {at::kHalf, 0x1p-11, 65504.0, 0x1p-14, 1e-2},
      {at::kBFloat16, 0x1p-8, 3.3895313892515355e38, 0x1p-126, 2e-2},
  };
  static const FloatInfo kExact = {at::kLong, 0, kInf, 0, 0};
  for (const FloatInfo& info : kInfo) {
    if (info.type == t) return info;
  }
  return kExact;
}

inline double unit_roundoff(at::ScalarType t) {
  return float_info(t).u;
}
inline double max_finite(at::ScalarType t) {
  return float_info(t).max;
}
inline double min_normal(at::ScalarType t) {
  return float_info(t).min_normal;
}
inline double rtol_floor(at::ScalarType t) {
  return float_info(t).rtol;
}

// What kiln computes a dtype in (and what eager accumulates reductions in).
inline at::ScalarType compute_type(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t;
}

inline const std::vector<at::ScalarType>& fuzz_dtypes() {
  static const std::vector<at::ScalarType> types = {
      at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kBool};
  return types;
}

inline std::string dtype_name(at::ScalarType t) {
  return ir::dtype_name(*to_ir_dtype(t));
}

inline std::string shape_string(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// --- Eager calls -------------------------------------------------------------------------------

inline const ir::Attr* find_attr(const ir::AttrList& attrs, const std::string& name) {
  for (const auto& [key, value] : attrs) {
    if (key == name) return &value;
  }
  return nullptr;
}

/// A Scalar attribute (an int or a double) as a double.
inline double scalar_value(const ir::Attr& attr) {
  if (const auto* i = std::get_if<int64_t>(&attr)) return static_cast<double>(*i);
  return std::get<double>(attr);
}

/// Runs `qualified` ("aten::add.Tensor") through the dispatcher the way the IR describes a call:
/// tensor arguments from `tensors` in order, the others from attributes or schema defaults.
inline at::Tensor call_op(const std::string& qualified, const std::vector<at::Tensor>& tensors,
                          const ir::AttrList& attrs) {
  const size_t dot = qualified.find('.', qualified.find("::"));
  const std::string name = qualified.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  std::vector<c10::IValue> stack;
  size_t next = 0;
  for (const c10::Argument& arg : op.schema().arguments()) {
    const ir::Attr* attr = find_attr(attrs, arg.name());
    c10::TypePtr type = arg.real_type();
    const bool tensor = type->kind() == c10::TypeKind::TensorType;
    auto optional = type->cast<c10::OptionalType>();
    const bool optional_tensor =
        optional && optional->getElementType()->kind() == c10::TypeKind::TensorType;
    if (tensor || (optional_tensor && !attr)) {
      stack.emplace_back(tensors.at(next++));
    } else if (attr) {
      stack.push_back(ivalue_from_attr(*attr, arg));
    } else if (arg.default_value()) {
      stack.push_back(*arg.default_value());
    } else {
      throw std::logic_error(qualified + ": no value for argument " + arg.name());
    }
  }
  if (next != tensors.size()) throw std::logic_error(qualified + ": too many tensors");
  op.callBoxed(stack);
  return stack.at(0).toTensor();
}

}  // namespace kiln::fuzz
