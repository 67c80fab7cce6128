// The helpers the fusible ops' definitions (passes/kernel/ops/) are written with: readers of a
// node's attributes, and `Lowering`, which appends the kernel-IR exprs of one graph node. The
// one-op lowerings are inline here; those that compose several kernel ops (the activations,
// log1p and expm1, softmax, layer norm, variance) are in lowering.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "passes/ir/graph.h"
#include "passes/kernel/kernel.h"

namespace kiln::kernel::lowering {

// --- Attributes --------------------------------------------------------------------------------

bool is_none(const ir::Node& node, const char* name);

/// A Scalar attribute: its value and the dtype ATen gives a wrapped number of its kind.
struct ScalarAttr {
  double value;
  DType kind;  // Float64, Int64 or Bool
};

std::optional<ScalarAttr> scalar_attr(const ir::Node& node, const char* name);
double scalar_or(const ir::Node& node, const char* name, double fallback);
std::optional<int64_t> int_attr(const ir::Node& node, const char* name);
bool bool_attr(const ir::Node& node, const char* name);
std::optional<std::vector<int64_t>> ints_attr(const ir::Node& node, const char* name);
std::optional<std::string> string_attr(const ir::Node& node, const char* name);

// --- Variance ----------------------------------------------------------------------------------

bool is_variance(const std::string& op);
/// What var/std subtract from the element count: `correction` (None means 1), else `unbiased`
/// (the overloads without `correction`; default true).
double correction(const ir::Node& node);
/// How many elements each output of a reduction combines.
int64_t reduced_count(const ir::Node& node);

// --- Lowering ----------------------------------------------------------------------------------

struct Lowering {
  KernelBuilder& b;
  const ir::Node& node;
  const std::vector<int>& args;
  DType out;  // the compute dtype of the node's output

  /// Operand i in the compute dtype. An integer or bool operand of an op whose result is
  /// float16 or bfloat16 goes through that type first, as ATen converts every operand to the
  /// result type (-639 is -640 in bfloat16); float operands keep their digits (fused ops are not
  /// rounded between them).
  int arg(size_t i) {
    const DType result = node.output()->type().dtype;
    const bool half = result == DType::Float16 || result == DType::BFloat16;
    if (half && !ir::is_floating(b.dtype(args.at(i))))
      return b.cast(b.cast(args.at(i), result), out);
    return b.cast(args.at(i), out);
  }
  int scalar(const char* name, double fallback = 0) {
    return b.constant(scalar_or(node, name, fallback), out);
  }
  int un(Op op, int x) { return b.unary(op, x, out); }
  int bin(Op op, int x, int y) { return b.binary(op, x, y, out); }
  int constant(double v) { return b.constant(v, out); }
  /// x + alpha * y, skipping the multiply when alpha is 1.
  int add_scaled(Op op, int x, int y) {
    const double alpha = scalar_or(node, "alpha", 1);
    if (alpha != 1) y = bin(Op::Mul, constant(alpha), y);
    return bin(op, x, y);
  }
  int clamp(int x, std::optional<int> lo, std::optional<int> hi) {
    if (lo) x = bin(Op::Max, x, *lo);
    if (hi) x = bin(Op::Min, x, *hi);
    return x;
  }
  int sigmoid(int x) { return un(Op::Sigmoid, x); }
  /// A cast: rounds to the output dtype (float16 too), then holds it in the compute dtype.
  int convert() { return b.cast(b.cast(args.at(0), node.output()->type().dtype), out); }
  int reduce(ReduceKind kind) { return b.reduce(kind, arg(0)); }

  /// ATen's hard activations, in its order of operations: min(max(x + 3, 0), 6) / 6, times x
  /// first for hardswish.
  int hard_activation(bool swish);
  int leaky_relu();
  /// log(1 + x) without losing x's digits to the rounding of 1 + x (Goldberg's correction):
  /// log(u) * (x / (u - 1)) with u = 1 + x, x itself where u is 1, log(u) where u is x (x = inf,
  /// and x so large that 1 + x rounds to it, where the correction is 1 anyway).
  int log1p(int x);
  /// exp(x) - 1 without the cancellation (Kahan's): (u - 1) * (x / log(u)) with u = exp(x); x
  /// where u is 1, -1 where u - 1 is, u itself where u is infinite or NaN.
  int expm1(int x);
  /// ATen's: x <= 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale (selu and celu are
  /// elus with fixed constants).
  int elu(double alpha, double scale, double input_scale);
  /// ATen's: x * beta > threshold ? x : log1p(exp(x * beta)) / beta.
  int softplus();
  /// ATen's: x * tanh(log1p(exp(x))).
  int mish();
  /// (0 < x) - (x < 0), as ATen computes it: 0 for NaN and for -0.
  int sign();
  int gelu(int x);
  int pow_scalar(int x, double e);
  /// Comparisons compute in ATen's result type of their operands.
  int compare(Op op);
  int softmax(bool log);
  /// var and std: the mean of squared deviations (as layer_norm's, so the LLVM code generator
  /// takes both reductions in one pass), times n / (n - correction).
  int variance(bool root);
  int linear();
  int layer_norm();
};

}  // namespace kiln::kernel::lowering
