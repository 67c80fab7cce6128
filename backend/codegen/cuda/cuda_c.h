// How kernel IR values are spelled in CUDA C: the C types of values and of stored elements,
// constants (bit-exact), conversions and every op, as the reference interpreter defines them
// (NaN-propagating max/min, wrapping integers, truncating casts, 16-bit floats computed in float
// and rounded after every op). The emitter (cuda_emitter.h) decides where they go.
#pragma once

#include <string>

#include "passes/kernel/kernel.h"

namespace kiln::codegen::cuda {

/// Throws kiln::Error (Unsupported) naming `what`.
[[noreturn]] void unsupported(const std::string& what);

bool is_float(kernel::DType t);
bool is_half(kernel::DType t);  // float16 or bfloat16

/// The C type a value of `t` is computed in (16-bit floats: float, rounded after every op).
std::string value_type(kernel::DType t);
/// The C type an element of a buffer of `t` is stored as.
std::string storage_type(kernel::DType t);
/// A value of `t` rounded as the interpreter rounds it (to the 16-bit format for those).
std::string rounded(const std::string& x, kernel::DType t);
/// An element read from memory as a value.
std::string from_storage(const std::string& element, kernel::DType t);
/// A value of `from` converted to `to` (the interpreter's make(as_double(x), to)).
std::string convert(const std::string& x, kernel::DType from, kernel::DType to);
/// A value of `t` as it is written to memory.
std::string to_storage(const std::string& x, kernel::DType t);
/// `value` as a constant of `t`, bit-exact.
std::string constant(double value, kernel::DType t);

/// Expression `e` (a unary or binary op of its dtype) applied to the texts `x` and `y` (empty
/// for a unary op): float_op for float dtypes, int_op for integer and bool ones.
std::string float_op(const kernel::Expr& e, const std::string& x, const std::string& y);
std::string int_op(const kernel::Expr& e, const std::string& x, const std::string& y);

}  // namespace kiln::codegen::cuda
