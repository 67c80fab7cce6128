#include "backend/codegen/cuda/cuda_c.h"

#include <bit>
#include <cmath>
#include <cstdio>

#include "kiln/error.h"
#include "passes/kernel/scalar_convert.h"

namespace kiln::codegen::cuda {

using kernel::DType;
using kernel::Expr;
using kernel::Op;

namespace {

std::string float_call(const char* name, DType t, const std::string& args) {
  return std::string(name) + (t == DType::Float64 ? "" : "f") + "(" + args + ")";
}

/// Integer arithmetic wraps, through unsigned as two's-complement hardware does.
std::string wrapping(const char* op, const std::string& a, const std::string& b, DType t) {
  return "static_cast<" + value_type(t) + ">(static_cast<unsigned long long>(" + a + ") " + op +
         " static_cast<unsigned long long>(" + b + "))";
}

}  // namespace

[[noreturn]] void unsupported(const std::string& what) {
  throw Error(ErrorKind::Unsupported, "CUDA codegen: " + what);
}

bool is_float(DType t) {
  return ir::is_floating(t);
}
bool is_half(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

std::string value_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int16:
      return "short";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    default:
      unsupported(std::string("dtype ") + ir::dtype_name(t));
  }
}

std::string storage_type(DType t) {
  if (is_half(t)) return "unsigned short";
  if (t == DType::Bool) return "unsigned char";
  return value_type(t);
}

std::string rounded(const std::string& x, DType t) {
  if (t == DType::Float16) return "kiln_round_half(" + x + ")";
  if (t == DType::BFloat16) return "kiln_round_bf16(" + x + ")";
  return x;
}

std::string from_storage(const std::string& element, DType t) {
  if (t == DType::Float16) return "kiln_from_half(" + element + ")";
  if (t == DType::BFloat16) return "kiln_from_bf16(" + element + ")";
  if (t == DType::Bool) return "(" + element + " != 0)";
  return element;
}

std::string convert(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  const std::string t = value_type(to);
  if (to == DType::Bool) return "(" + x + " != 0)";
  if (is_float(to)) {
    if (is_float(from)) return rounded("static_cast<" + t + ">(" + x + ")", to);
    return rounded("static_cast<" + t + ">(static_cast<double>(" + x + "))", to);
  }
  if (is_float(from)) {  // float -> integer: defined for NaN, inf and out of range (prelude)
    const char* via = kernel::converts_through_int64(from, to) ? "kiln_to_int64" : "kiln_to_int32";
    return "static_cast<" + t + ">(" + via + "(" + x + "))";
  }
  return "static_cast<" + t + ">(" + x + ")";
}

std::string to_storage(const std::string& x, DType t) {
  if (t == DType::Float16) return "kiln_to_half(" + x + ")";
  if (t == DType::BFloat16) return "kiln_to_bf16(" + x + ")";
  if (t == DType::Bool) return "static_cast<unsigned char>(" + x + ")";
  return x;
}

std::string constant(double value, DType t) {
  char text[64];
  if (t == DType::Float64) {
    std::snprintf(text, sizeof text, "__longlong_as_double(0x%016llxLL)",
                  static_cast<unsigned long long>(std::bit_cast<uint64_t>(value)));
    return text;
  }
  if (is_float(t)) {
    float f = static_cast<float>(value);
    if (t == DType::Float16) f = kernel::float_from_half(kernel::half_from_float(f));
    if (t == DType::BFloat16) f = kernel::float_from_bfloat16(kernel::bfloat16_from_float(f));
    std::snprintf(text, sizeof text, "__int_as_float(0x%08x)", std::bit_cast<uint32_t>(f));
    return text;
  }
  if (t == DType::Bool) return value != 0 || std::isnan(value) ? "true" : "false";
  const long long i = kernel::integer_from_float(value, DType::Float64, t);
  // 9223372036854775808LL is no literal: the most negative value is written as a difference.
  const std::string literal =
      i == INT64_MIN ? "(-9223372036854775807LL - 1)" : std::to_string(i) + "LL";
  return "static_cast<" + value_type(t) + ">(" + literal + ")";
}

std::string float_op(const Expr& e, const std::string& x, const std::string& y) {
  const DType t = e.dtype;
  const std::string one = t == DType::Float64 ? "1.0" : "1.0f";
  switch (e.op) {
    case Op::Neg:
      return "(-" + x + ")";
    case Op::Abs:
      return float_call("fabs", t, x);
    case Op::Exp:
      return float_call("exp", t, x);
    case Op::Log:
      return float_call("log", t, x);
    case Op::Sqrt:
      return float_call("sqrt", t, x);
    case Op::Rsqrt:
      return "kiln_rsqrt(" + x + ")";
    case Op::Reciprocal:
      return "(" + one + " / " + x + ")";
    case Op::Erf:
      return float_call("erf", t, x);
    case Op::Tanh:
      return float_call("tanh", t, x);
    case Op::Sigmoid:
      return "kiln_sigmoid(" + x + ")";
    case Op::Floor:
      return float_call("floor", t, x);
    case Op::Trunc:
      return float_call("trunc", t, x);
    case Op::Add:
      return "(" + x + " + " + y + ")";
    case Op::Sub:
      return "(" + x + " - " + y + ")";
    case Op::Mul:
      return "(" + x + " * " + y + ")";
    case Op::Div:
      return "(" + x + " / " + y + ")";
    case Op::Max:
      return "kiln_fmax(" + x + ", " + y + ")";
    case Op::Min:
      return "kiln_fmin(" + x + ", " + y + ")";
    default:
      unsupported(std::string("float op ") + kernel::op_name(e.op));
  }
}

std::string int_op(const Expr& e, const std::string& x, const std::string& y) {
  const DType t = e.dtype;
  const std::string type = value_type(t);
  switch (e.op) {
    case Op::Neg:
      return wrapping("-", "0", x, t);
    case Op::Abs:
      return "(" + x + " < 0 ? " + wrapping("-", "0", x, t) + " : " + x + ")";
    case Op::Not:
      return "(!" + x + ")";
    case Op::Floor:
    case Op::Trunc:
      return x;
    case Op::Add:
      return wrapping("+", x, y, t);
    case Op::Sub:
      return wrapping("-", x, y, t);
    case Op::Mul:
      return wrapping("*", x, y, t);
    case Op::Div:
      return "(" + y + " == 0 ? static_cast<" + type + ">(0) : static_cast<" + type + ">(" + x +
             " / " + y + "))";
    case Op::Max:
      return "(" + x + " > " + y + " ? " + x + " : " + y + ")";
    case Op::Min:
      return "(" + x + " < " + y + " ? " + x + " : " + y + ")";
    case Op::And:
      return "(" + x + " && " + y + ")";
    case Op::Or:
      return "(" + x + " || " + y + ")";
    default:
      unsupported(std::string("integer op ") + kernel::op_name(e.op));
  }
}

}  // namespace kiln::codegen::cuda
