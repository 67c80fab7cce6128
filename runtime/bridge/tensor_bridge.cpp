#include "runtime/bridge/tensor_bridge.h"

#include <ATen/ATen.h>
#include <ATen/core/jit_type.h>

#include "kiln/error.h"

namespace kiln {
namespace {

struct DTypePair {
  at::ScalarType aten;
  ir::DType ir;
};

constexpr DTypePair kDTypes[] = {
    {at::kBool, ir::DType::Bool},
    {at::kByte, ir::DType::UInt8},
    {at::kChar, ir::DType::Int8},
    {at::kShort, ir::DType::Int16},
    {at::kInt, ir::DType::Int32},
    {at::kLong, ir::DType::Int64},
    {at::kHalf, ir::DType::Float16},
    {at::kBFloat16, ir::DType::BFloat16},
    {at::kFloat, ir::DType::Float32},
    {at::kDouble, ir::DType::Float64},
    {at::kComplexFloat, ir::DType::Complex64},
    {at::kComplexDouble, ir::DType::Complex128},
};

[[noreturn]] void bad_attr(const ir::Attr& attr, const c10::Argument& arg) {
  throw Error(ErrorKind::Internal, "attribute " + ir::attr_string(attr) +
                                       " cannot be passed as argument '" + arg.name() +
                                       "' of type " + arg.type()->str());
}

}  // namespace

std::optional<ir::DType> to_ir_dtype(at::ScalarType type) {
  for (const auto& d : kDTypes) {
    if (d.aten == type) return d.ir;
  }
  return std::nullopt;
}

at::ScalarType to_aten_dtype(ir::DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.ir == dtype) return d.aten;
  }
  throw Error(ErrorKind::Internal, "no ATen dtype for " + std::string(ir::dtype_name(dtype)));
}

std::optional<ir::Device> to_ir_device(const c10::Device& device) {
  ir::Device out;
  out.index = device.has_index() ? device.index() : -1;
  switch (device.type()) {
    case c10::DeviceType::CPU:
      out.kind = ir::DeviceKind::CPU;
      out.index = -1;
      return out;
    case c10::DeviceType::CUDA:
      out.kind = ir::DeviceKind::CUDA;
      return out;
    case c10::DeviceType::Meta:
      out.kind = ir::DeviceKind::Meta;
      out.index = -1;
      return out;
    default:
      return std::nullopt;
  }
}

c10::Device to_aten_device(const ir::Device& device) {
  switch (device.kind) {
    case ir::DeviceKind::CPU:
      return c10::Device(c10::DeviceType::CPU);
    case ir::DeviceKind::CUDA:
      return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device.index));
    case ir::DeviceKind::Meta:
      return c10::Device(c10::DeviceType::Meta);
  }
  throw Error(ErrorKind::Internal, "unknown device kind");
}

at::Tensor meta_like(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

std::optional<ir::TensorType> tensor_type_of(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.layout() != at::kStrided) return std::nullopt;
  auto dtype = to_ir_dtype(tensor.scalar_type());
  auto device = to_ir_device(tensor.device());
  if (!dtype || !device) return std::nullopt;
  ir::TensorType type;
  type.dtype = *dtype;
  type.device = *device;
  type.sizes = tensor.sizes().vec();
  type.strides = tensor.strides().vec();
  return type;
}

std::optional<ir::Attr> attr_from_ivalue(const c10::IValue& value) {
  if (value.isNone()) return ir::Attr(ir::NoneAttr{});
  if (value.isBool()) return ir::Attr(value.toBool());
  if (value.isInt()) return ir::Attr(value.toInt());
  if (value.isDouble()) return ir::Attr(value.toDouble());
  if (value.isString()) return ir::Attr(value.toStringRef());
  if (value.isDevice()) return ir::Attr(value.toDevice().str());
  if (value.isIntList()) return ir::Attr(value.toIntVector());
  if (value.isDoubleList()) return ir::Attr(value.toDoubleVector());
  if (value.isBoolList()) {
    std::vector<bool> out;
    for (bool b : value.toBoolList())
      out.push_back(b);
    return ir::Attr(std::move(out));
  }
  return std::nullopt;
}

c10::IValue ivalue_from_attr(const ir::Attr& attr, const c10::Argument& arg) {
  if (std::holds_alternative<ir::NoneAttr>(attr)) return c10::IValue();
  c10::TypePtr type = arg.real_type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
      if (auto* v = std::get_if<int64_t>(&attr)) return *v;
      bad_attr(attr, arg);
    case c10::TypeKind::FloatType:
      if (auto* v = std::get_if<double>(&attr)) return *v;
      if (auto* v = std::get_if<int64_t>(&attr)) return static_cast<double>(*v);
      bad_attr(attr, arg);
    case c10::TypeKind::BoolType:
      if (auto* v = std::get_if<bool>(&attr)) return *v;
      bad_attr(attr, arg);
    case c10::TypeKind::NumberType:  // Scalar
      if (auto* v = std::get_if<int64_t>(&attr)) return *v;
      if (auto* v = std::get_if<double>(&attr)) return *v;
      if (auto* v = std::get_if<bool>(&attr)) return *v;
      bad_attr(attr, arg);
    case c10::TypeKind::StringType:
      if (auto* v = std::get_if<std::string>(&attr)) return *v;
      bad_attr(attr, arg);
    case c10::TypeKind::DeviceObjType:
      if (auto* v = std::get_if<std::string>(&attr)) return c10::Device(*v);
      bad_attr(attr, arg);
    case c10::TypeKind::ListType: {
      auto element = type->expectRef<c10::ListType>().getElementType();
      if (element->kind() == c10::TypeKind::FloatType) {
        if (auto* v = std::get_if<std::vector<double>>(&attr)) return *v;
        if (auto* v = std::get_if<std::vector<int64_t>>(&attr))
          return std::vector<double>(v->begin(), v->end());
      } else if (element->kind() == c10::TypeKind::BoolType) {
        if (auto* v = std::get_if<std::vector<bool>>(&attr)) {
          c10::List<bool> list;
          for (bool b : *v)
            list.push_back(b);
          return list;
        }
      } else if (element->kind() == c10::TypeKind::OptionalType) {
        // Scalar?[] (oneDNN's post-op scalars): numbers from an int or float list.
        c10::List<std::optional<at::Scalar>> list;
        if (auto* v = std::get_if<std::vector<int64_t>>(&attr)) {
          for (int64_t x : *v)
            list.push_back(at::Scalar(x));
          return list;
        }
        if (auto* v = std::get_if<std::vector<double>>(&attr)) {
          for (double x : *v)
            list.push_back(at::Scalar(x));
          return list;
        }
      } else if (auto* v = std::get_if<std::vector<int64_t>>(&attr)) {
        return *v;  // int[], SymInt[]
      }
      bad_attr(attr, arg);
    }
    default:
      bad_attr(attr, arg);
  }
}

std::string qualified_op_name(const c10::FunctionSchema& schema) {
  if (schema.overload_name().empty()) return schema.name();
  return schema.name() + "." + schema.overload_name();
}

bool is_tensor_type(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::TensorType;
}

bool is_optional_tensor_type(const c10::TypePtr& type) {
  auto optional = type->cast<c10::OptionalType>();
  return optional && is_tensor_type(optional->getElementType());
}

bool is_tensor_list_type(const c10::TypePtr& type) {
  auto list = type->cast<c10::ListType>();
  return list && is_tensor_type(list->getElementType());
}

bool is_optional_tensor_list_type(const c10::TypePtr& type) {
  auto list = type->cast<c10::ListType>();
  return list && is_optional_tensor_type(list->getElementType());
}

bool has_layout(const at::Tensor& t, const ir::TensorType& type) {
  if (t.dim() != type.rank()) return false;
  for (int64_t d = 0; d < type.rank(); ++d) {
    if (t.size(d) != type.sizes[d]) return false;
    if (type.sizes[d] > 1 && t.stride(d) != type.strides[d]) return false;
  }
  return true;
}

}  // namespace kiln
