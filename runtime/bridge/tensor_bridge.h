// The bridge between ATen and the graph IR: dtypes, devices, tensor types, and the conversion of
// operator arguments between IValues and IR attributes. The runtime and capture use it; passes/
// never sees a torch type.
#pragma once

#include <ATen/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>

#include "passes/base/export.h"
#include "passes/ir/attr.h"
#include "passes/ir/types.h"

namespace kiln {

/// nullopt for a scalar type the IR has no name for (quantized types, float8, ...).
std::optional<ir::DType> to_ir_dtype(at::ScalarType type);
at::ScalarType to_aten_dtype(ir::DType dtype);
/// nullopt for devices other than CPU, CUDA and meta.
std::optional<ir::Device> to_ir_device(const c10::Device& device);
c10::Device to_aten_device(const ir::Device& device);

/// The static type of a tensor; nullopt when its dtype or device has no IR form.
std::optional<ir::TensorType> tensor_type_of(const at::Tensor& tensor);

/// True when `t` has `type`'s sizes and is laid out as it says: strides equal but on dims of size
/// 1, where a stride is never multiplied by anything but 0.
bool has_layout(const at::Tensor& t, const ir::TensorType& type);

/// A meta tensor with `t`'s sizes, strides and dtype (for shape inference without data).
at::Tensor meta_like(const at::Tensor& t);

/// A non-tensor argument as an IR attribute; nullopt for values the IR cannot hold (complex
/// numbers, tensors, objects, nested lists).
std::optional<ir::Attr> attr_from_ivalue(const c10::IValue& value);

/// The IValue for an attribute passed as argument `arg` of a schema (the schema says whether
/// an integer is an int, a Scalar, a dtype or a float). Throws kiln::Error (internal) when the
/// attribute cannot be that argument.
c10::IValue ivalue_from_attr(const ir::Attr& attr, const c10::Argument& arg);

/// Schema argument types: Tensor, Tensor?, Tensor[].
KILN_INTERNAL bool is_tensor_type(const c10::TypePtr& type);
KILN_INTERNAL bool is_optional_tensor_type(const c10::TypePtr& type);
KILN_INTERNAL bool is_tensor_list_type(const c10::TypePtr& type);
/// `Tensor?[]` (`aten::index`'s and `index_put`'s indices): elements may be None.
KILN_INTERNAL bool is_optional_tensor_list_type(const c10::TypePtr& type);

/// "aten::add.Tensor" for the schema of add.Tensor; "aten::relu" when there is no overload name.
std::string qualified_op_name(const c10::FunctionSchema& schema);

}  // namespace kiln
