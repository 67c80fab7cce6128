#include "passes/kernel/lowering.h"

#include <numbers>
#include <variant>

#include "passes/kernel/lower_ops.h"

namespace kiln::kernel::lowering {
namespace {

// --- Type promotion (ATen's result_type, for comparisons) ---------------------------------------

int category(DType t) {
  if (t == DType::Bool) return 0;
  return ir::is_floating(t) ? 2 : 1;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (category(a) == 2) {
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (b == DType::Float16 && a == DType::BFloat16))
      return DType::Float32;
    return ir::dtype_size(a) >= ir::dtype_size(b) ? a : b;
  }
  // Integers: uint8 with a signed type needs a signed type wider than 8 bits.
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType other = a == DType::UInt8 ? b : a;
    return other == DType::Int8 ? DType::Int16 : other;
  }
  return ir::dtype_size(a) >= ir::dtype_size(b) ? a : b;
}

struct ResultType {
  std::optional<DType> dim, zero_dim, wrapped;

  void add_tensor(const ir::TensorType& t) {
    auto& slot = t.rank() > 0 ? dim : zero_dim;
    slot = slot ? promote_types(*slot, t.dtype) : t.dtype;
  }
  void add_scalar(DType kind) {
    // A wrapped Python float counts as the default dtype.
    DType t = kind == DType::Float64 ? DType::Float32 : kind;
    wrapped = wrapped ? promote_types(*wrapped, t) : t;
  }
  static std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
    if (!higher) return lower;
    if (!lower) return higher;
    if (category(*higher) == 2) return higher;
    if (*higher == DType::Bool || category(*lower) == 2) return promote_types(*higher, *lower);
    return higher;
  }
  DType result() const { return combine(dim, combine(zero_dim, wrapped)).value_or(DType::Float32); }
};

}  // namespace

// --- Attributes --------------------------------------------------------------------------------

bool is_none(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  return !attr || std::holds_alternative<ir::NoneAttr>(*attr);
}

std::optional<ScalarAttr> scalar_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  if (!attr) return std::nullopt;
  if (auto* d = std::get_if<double>(attr)) return ScalarAttr{*d, DType::Float64};
  if (auto* i = std::get_if<int64_t>(attr))
    return ScalarAttr{static_cast<double>(*i), DType::Int64};
  if (auto* b = std::get_if<bool>(attr)) return ScalarAttr{*b ? 1.0 : 0.0, DType::Bool};
  return std::nullopt;
}

double scalar_or(const ir::Node& node, const char* name, double fallback) {
  auto s = scalar_attr(node, name);
  return s ? s->value : fallback;
}

std::optional<int64_t> int_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  if (auto* i = attr ? std::get_if<int64_t>(attr) : nullptr) return *i;
  return std::nullopt;
}

bool bool_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  auto* b = attr ? std::get_if<bool>(attr) : nullptr;
  return b && *b;
}

std::optional<std::vector<int64_t>> ints_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  if (!attr) return std::nullopt;
  if (auto* v = std::get_if<std::vector<int64_t>>(attr)) return *v;
  if (auto* i = std::get_if<int64_t>(attr)) return std::vector<int64_t>{*i};
  return std::nullopt;
}

std::optional<std::string> string_attr(const ir::Node& node, const char* name) {
  const ir::Attr* attr = node.find_attr(name);
  if (auto* s = attr ? std::get_if<std::string>(attr) : nullptr) return *s;
  return std::nullopt;
}

// --- Variance ----------------------------------------------------------------------------------

bool is_variance(const std::string& op) {
  return op == "aten::var" || op.starts_with("aten::var.") || op == "aten::std" ||
         op.starts_with("aten::std.");
}

double correction(const ir::Node& node) {
  if (node.find_attr("correction")) return scalar_or(node, "correction", 1);
  const ir::Attr* unbiased = node.find_attr("unbiased");
  return !unbiased || bool_attr(node, "unbiased") ? 1 : 0;
}

int64_t reduced_count(const ir::Node& node) {
  int64_t n = 1;
  for (int d : reduced_dims(node).value_or(std::vector<int>{}))
    n *= node.input(0)->type().sizes.at(d);
  return n;
}

// --- Compositions ------------------------------------------------------------------------------

int Lowering::hard_activation(bool swish) {
  const int x = arg(0);
  const int gate = clamp(bin(Op::Add, x, constant(3)), constant(0), constant(6));
  return bin(Op::Div, swish ? bin(Op::Mul, x, gate) : gate, constant(6));
}

int Lowering::leaky_relu() {
  const int x = arg(0);
  const int positive = b.binary(Op::Gt, x, constant(0), DType::Bool);
  return b.where(positive, x, bin(Op::Mul, x, scalar("negative_slope", 0.01)), out);
}

int Lowering::log1p(int x) {
  const int u = bin(Op::Add, constant(1), x);
  const int log_u = un(Op::Log, u);
  const int r = bin(Op::Mul, log_u, bin(Op::Div, x, bin(Op::Sub, u, constant(1))));
  const int tiny = b.binary(Op::Eq, u, constant(1), DType::Bool);
  return b.where(b.binary(Op::Eq, u, x, DType::Bool), log_u, b.where(tiny, x, r, out), out);
}

int Lowering::expm1(int x) {
  const int u = un(Op::Exp, x);
  const int u_1 = bin(Op::Sub, u, constant(1));
  int r = bin(Op::Mul, u_1, bin(Op::Div, x, un(Op::Log, u)));
  r = b.where(b.binary(Op::Eq, u_1, constant(-1), DType::Bool), constant(-1), r, out);
  r = b.where(b.binary(Op::Eq, u, constant(1), DType::Bool), x, r, out);
  const int not_finite = b.binary(Op::Ne, bin(Op::Sub, u, u), constant(0), DType::Bool);
  return b.where(not_finite, u, r, out);
}

int Lowering::elu(double alpha, double scale, double input_scale) {
  const int x = arg(0);
  const int inner = input_scale == 1 ? x : bin(Op::Mul, x, constant(input_scale));
  const int negative = bin(Op::Mul, expm1(inner), constant(alpha * scale));
  const int positive = scale == 1 ? x : bin(Op::Mul, x, constant(scale));
  return b.where(b.binary(Op::Le, x, constant(0), DType::Bool), negative, positive, out);
}

int Lowering::softplus() {
  const int x = arg(0);
  const int scaled = bin(Op::Mul, x, scalar("beta", 1));
  const int soft = bin(Op::Div, log1p(un(Op::Exp, scaled)), scalar("beta", 1));
  const int linear = b.binary(Op::Gt, scaled, scalar("threshold", 20), DType::Bool);
  return b.where(linear, x, soft, out);
}

int Lowering::mish() {
  const int x = arg(0);
  return bin(Op::Mul, x, un(Op::Tanh, log1p(un(Op::Exp, x))));
}

int Lowering::sign() {
  const int x = arg(0);
  const int above = b.cast(b.binary(Op::Lt, constant(0), x, DType::Bool), out);
  return bin(Op::Sub, above, b.cast(b.binary(Op::Lt, x, constant(0), DType::Bool), out));
}

int Lowering::gelu(int x) {
  const std::string approximate = string_attr(node, "approximate").value_or("none");
  const int half_x = bin(Op::Mul, constant(0.5), x);
  if (approximate == "tanh") {
    const double k = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)
    const int cube = bin(Op::Mul, bin(Op::Mul, x, x), x);
    const int inner =
        bin(Op::Mul, constant(k), bin(Op::Add, x, bin(Op::Mul, constant(0.044715), cube)));
    return bin(Op::Mul, half_x, bin(Op::Add, constant(1), un(Op::Tanh, inner)));
  }
  const int scaled = bin(Op::Mul, x, constant(1 / std::numbers::sqrt2));
  return bin(Op::Mul, half_x, bin(Op::Add, constant(1), un(Op::Erf, scaled)));
}

int Lowering::pow_scalar(int x, double e) {
  if (e == 1) return x;
  if (e == 2) return bin(Op::Mul, x, x);
  if (e == 3) return bin(Op::Mul, bin(Op::Mul, x, x), x);
  if (e == 0.5) return un(Op::Sqrt, x);
  if (e == -0.5) return un(Op::Rsqrt, x);
  if (e == -1) return un(Op::Reciprocal, x);
  return bin(Op::Div, constant(1), bin(Op::Mul, x, x));  // e == -2
}

int Lowering::compare(Op op) {
  ResultType rt;
  for (const ir::Value* v : node.inputs())
    rt.add_tensor(v->type());
  if (auto s = scalar_attr(node, "other")) rt.add_scalar(s->kind);
  // ATen converts both operands to the common dtype first: a float16 comparison rounds a
  // float scalar (or a 0-dim float32 tensor) to float16 before comparing.
  const DType common = rt.result();
  const DType compute = compute_dtype(common);
  auto operand = [&](int expr) { return b.cast(b.cast(expr, common), compute); };
  const int x = operand(args.at(0));
  const int y =
      args.size() > 1 ? operand(args[1]) : operand(b.constant(scalar_or(node, "other", 0), common));
  return b.binary(op, x, y, DType::Bool);
}

int Lowering::softmax(bool log) {
  const int x = arg(0);
  const int max = b.reduce(ReduceKind::Max, x);
  const int shifted = bin(Op::Sub, x, max);
  const int exp = un(Op::Exp, shifted);
  const int sum = b.reduce(ReduceKind::Sum, exp);
  if (log) return bin(Op::Sub, shifted, un(Op::Log, sum));
  // One division per row, then a multiply per element (as ATen's vectorized softmax does).
  return bin(Op::Mul, exp, un(Op::Reciprocal, sum));
}

int Lowering::variance(bool root) {
  const int x = arg(0);
  const int centered = bin(Op::Sub, x, b.reduce(ReduceKind::Mean, x));
  int var = b.reduce(ReduceKind::Mean, bin(Op::Mul, centered, centered));
  if (const double c = correction(node); c != 0) {
    // n / (n - c) as operations on the count, not one folded number: the count is then a size
    // term a size-generic kernel reads at run time (the code generator folds it where static).
    const int n = constant(static_cast<double>(reduced_count(node)));
    var = bin(Op::Mul, var, bin(Op::Div, n, bin(Op::Sub, n, constant(c))));
  }
  return root ? un(Op::Sqrt, var) : var;
}

int Lowering::linear() {
  // The iteration space is [..., N, K]: a dot product per output element, then the bias.
  int y = b.reduce(ReduceKind::Sum, bin(Op::Mul, arg(0), arg(1)));
  if (args.size() > 2) y = bin(Op::Add, y, arg(2));
  return y;
}

int Lowering::layer_norm() {
  // The mean, then the mean of squared deviations: as accurate as Welford's update, with no
  // division per element. The interpreter and the CUDA code take two passes over the row; the
  // LLVM code generator computes both in one (backend/codegen/llvm/moments.h).
  const int x = arg(0);
  const int mean = b.reduce(ReduceKind::Mean, x);
  const int centered = bin(Op::Sub, x, mean);
  const int var = b.reduce(ReduceKind::Mean, bin(Op::Mul, centered, centered));
  const int rstd = un(Op::Rsqrt, bin(Op::Add, var, scalar("eps", 1e-5)));
  int y = bin(Op::Mul, centered, rstd);
  size_t next = 1;
  // A present optional tensor is an input with no attribute; an absent one is `name=None`.
  if (!node.find_attr("weight") && next < args.size()) y = bin(Op::Mul, y, arg(next++));
  if (!node.find_attr("bias") && next < args.size()) y = bin(Op::Add, y, arg(next++));
  return y;
}

}  // namespace kiln::kernel::lowering
