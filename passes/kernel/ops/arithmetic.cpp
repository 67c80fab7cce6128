// Arithmetic: + - * / with scalars and alpha, the unary math functions, pow by a constant,
// maximum, minimum and sign.
#include "passes/kernel/op_lowering.h"

namespace kiln::kernel {

using namespace lowering;

namespace {

// Eager rounds alpha * other to a float16/bfloat16 dtype before adding; computed in float32,
// near cancellation kiln's more exact result differs from eager's by many half ulps. ATen keeps
// those.
bool no_half_alpha(const ir::Node& node) {
  const DType out = node.output()->type().dtype;
  const bool half = out == DType::Float16 || out == DType::BFloat16;
  return !half || scalar_or(node, "alpha", 1) == 1;
}

bool division_mode_supported(const ir::Node& node) {
  const DType out = node.output()->type().dtype;
  if (is_none(node, "rounding_mode")) return ir::is_floating(out);
  // Eager rounds a float16/bfloat16 quotient to its dtype before truncating it; kiln computes
  // halves in float32, which would truncate the unrounded quotient (2.99 -> 2, not 3).
  return string_attr(node, "rounding_mode") == "trunc" &&
         (out == DType::Float32 || out == DType::Float64);
}

// The exponents pow_scalar writes as products, square roots and reciprocals.
bool exponent_supported(const ir::Node& node) {
  const double e = scalar_or(node, "exponent", 0);
  return float_output(node) &&
         (e == 1 || e == 2 || e == 3 || e == 0.5 || e == -0.5 || e == -1 || e == -2);
}

OpLowering unary(std::string_view name, Op op) {
  return {name, [op](Lowering& l) { return l.un(op, l.arg(0)); }};
}

}  // namespace

OpFamily arithmetic_ops() {
  return {
      {"aten::add.Tensor", [](Lowering& l) { return l.add_scaled(Op::Add, l.arg(0), l.arg(1)); },
       no_half_alpha},
      {"aten::add.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Add, l.arg(0), l.scalar("other")); },
       no_half_alpha},
      {"aten::sub.Tensor", [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(0), l.arg(1)); },
       no_half_alpha},
      {"aten::sub.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(0), l.scalar("other")); },
       no_half_alpha},
      {"aten::rsub.Tensor", [](Lowering& l) { return l.add_scaled(Op::Sub, l.arg(1), l.arg(0)); },
       no_half_alpha},
      {"aten::rsub.Scalar",
       [](Lowering& l) { return l.add_scaled(Op::Sub, l.scalar("other"), l.arg(0)); },
       no_half_alpha},
      {"aten::mul.Tensor", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.arg(1)); }},
      {"aten::mul.Scalar", [](Lowering& l) { return l.bin(Op::Mul, l.arg(0), l.scalar("other")); }},
      {"aten::div.Tensor", [](Lowering& l) { return l.bin(Op::Div, l.arg(0), l.arg(1)); }},
      {"aten::div.Scalar", [](Lowering& l) { return l.bin(Op::Div, l.arg(0), l.scalar("other")); }},
      {"aten::div.Tensor_mode",
       [](Lowering& l) {
         const int q = l.bin(Op::Div, l.arg(0), l.arg(1));
         return string_attr(l.node, "rounding_mode") == "trunc" ? l.un(Op::Trunc, q) : q;
       },
       division_mode_supported},
      unary("aten::neg", Op::Neg),
      unary("aten::abs", Op::Abs),
      unary("aten::exp", Op::Exp),
      unary("aten::log", Op::Log),
      unary("aten::sqrt", Op::Sqrt),
      unary("aten::rsqrt", Op::Rsqrt),
      unary("aten::reciprocal", Op::Reciprocal),
      unary("aten::erf", Op::Erf),
      {"aten::log1p", [](Lowering& l) { return l.log1p(l.arg(0)); }},
      {"aten::expm1", [](Lowering& l) { return l.expm1(l.arg(0)); }},
      {"aten::pow.Tensor_Scalar",
       [](Lowering& l) { return l.pow_scalar(l.arg(0), scalar_or(l.node, "exponent", 1)); },
       exponent_supported},
      {"aten::maximum", [](Lowering& l) { return l.bin(Op::Max, l.arg(0), l.arg(1)); }},
      {"aten::minimum", [](Lowering& l) { return l.bin(Op::Min, l.arg(0), l.arg(1)); }},
      {"aten::sign", [](Lowering& l) { return l.sign(); }},
  };
}

}  // namespace kiln::kernel
