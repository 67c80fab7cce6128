#include "fuzz/fuzz_case.h"

#include "fuzz/error_bounds.h"
#include "fuzz/fuzz_support.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include "backend/api/compile_graph.h"
#include "kiln/options.h"
#include "passes/ir/parser.h"
#include "passes/ir/printer.h"
#include "runtime/bridge/tensor_bridge.h"
#include "runtime/executor.h"

namespace kiln::fuzz {
namespace {
constexpr int64_t kMaxNumel = 16384;  // no op output larger than this

// --- Random choices ----------------------------------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(engine_); }
  bool chance(double p) { return uniform() < p; }
  int64_t range(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  double normal() { return std::normal_distribution<double>(0, 1)(engine_); }
  template <typename T>
  T pick(const std::vector<T>& items) {
    return items.at(range(0, static_cast<int64_t>(items.size()) - 1));
  }
  size_t weighted(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights)
      total += w;
    double x = uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if ((x -= weights[i]) < 0) return i;
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

// --- The generator -----------------------------------------------------------------------------

struct Fresh {
  at::Tensor tensor;
  std::string note;
  bool constant = false;
};

// An operand of a proposed op: a value of the pool, or a tensor made for it, which becomes a
// graph input (or a constant) if the op is kept.
struct Operand {
  int val = -1;
  Fresh fresh;
};

struct Proposal {
  std::string op;
  std::vector<Operand> args;
  ir::AttrList attrs;
};

bool broadcastable(at::IntArrayRef a, at::IntArrayRef b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

class Generator {
 public:
  Generator(uint64_t seed, bool all_outputs, bool large)
      : rng_(seed), all_outputs_(all_outputs), large_(large) {
    case_.seed = seed;
    case_.large = large;
    case_.graph = std::make_unique<ir::Graph>();
  }
  /// A symbolic case (make_symbolic_case): `binding` empty for the seed's own sizes.
  Generator(uint64_t seed, std::span<const int64_t> binding) : Generator(seed, false, false) {
    symbolic_ = true;
    binding_.assign(binding.begin(), binding.end());
  }

  FuzzCase run();

 private:
  using Pred = std::function<bool(const Val&)>;

  // Shapes, dtypes and tensors.
  std::vector<int64_t> random_shape(int rank);
  std::vector<int64_t> partner_shape(at::IntArrayRef shape);
  at::ScalarType fresh_dtype(at::ScalarType like);
  std::pair<at::Tensor, std::string> fill(const std::vector<int64_t>& shape, at::ScalarType dtype);
  Fresh fresh(const std::vector<int64_t>& shape, at::ScalarType dtype, bool strided = true);

  // Operands.
  int pick(const Pred& pred);
  Operand operand(const Pred& pred, double p_existing, const std::vector<int64_t>& shape,
                  at::ScalarType dtype);
  Operand partner(const Operand& first, const Pred& pred, double p_existing);
  const at::Tensor& tensor(const Operand& o) const {
    return o.val >= 0 ? pool_[o.val].eager : o.fresh.tensor;
  }
  bool exact(const Operand& o) const { return o.val < 0 || pool_[o.val].exact; }
  ir::Attr scalar(bool integral);

  // One op.
  bool propose(Proposal& p);
  bool apply(Proposal& p);
  int commit(Fresh& f);

  Rng rng_;
  FuzzCase case_;
  std::vector<Val> pool_;
  // The last reduction of a value already in the pool: a later one may reduce the same value
  // over the same dims (a sibling, which kiln computes in the same kernel).
  struct LastReduction {
    int input = -1;
    std::vector<int64_t> dims;
    bool keepdim = false;
  } last_reduction_;
  std::vector<std::string> constant_notes_;
  std::vector<int64_t> shape_;  // the case's main shape
  at::ScalarType dtype_ = at::kFloat;
  bool zero_sizes_ = false;
  bool all_outputs_ = false;
  bool large_ = false;
  // Symbolic: element values from a stream per tensor, and the size dims of shape_ at binding_.
  bool symbolic_ = false;
  std::vector<int64_t> binding_;
  void choose_size_dims();
};

std::vector<int64_t> Generator::random_shape(int rank) {
  std::vector<int64_t> shape;
  for (int i = 0; i < rank; ++i) {
    switch (rng_.weighted({15, 45, 25, 10, zero_sizes_ ? 5.0 : 0.0})) {
      case 0:
        shape.push_back(1);
        break;
      case 1:
        shape.push_back(rng_.range(2, 8));
        break;
      case 2:
        shape.push_back(rng_.range(9, 40));
        break;
      case 3:
        shape.push_back(rng_.pick<int64_t>({64, 100, 128}));
        break;
      default:
        shape.push_back(0);
        break;
    }
  }
  auto numel = [&] {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  };
  while (numel() > 4096) {
    auto largest = std::max_element(shape.begin(), shape.end());
    *largest = (*largest + 1) / 2;
  }
  return shape;
}

std::vector<int64_t> Generator::partner_shape(at::IntArrayRef shape) {
  std::vector<int64_t> s = shape.vec();
  const double r = rng_.uniform();
  if (r < 0.5) return s;
  if (r < 0.8) {  // fewer leading dims, some dims 1: broadcasts up to `shape`
    if (!s.empty() && rng_.chance(0.4)) s.erase(s.begin(), s.begin() + rng_.range(1, s.size()));
    for (int64_t& d : s) {
      if (rng_.chance(0.3)) d = 1;
    }
    return s;
  }
  if (r < 0.92 && s.size() < 4) {  // `shape` broadcasts up to this one
    for (int64_t& d : s) {
      if (d == 1 && rng_.chance(0.5)) d = rng_.range(2, 6);
    }
    const int64_t extra = rng_.range(1, 4 - static_cast<int64_t>(s.size()));
    for (int64_t i = 0; i < extra && rng_.chance(0.7); ++i)
      s.insert(s.begin(), rng_.range(1, 5));
    return s;
  }
  return {};
}

at::ScalarType Generator::fresh_dtype(at::ScalarType like) {
  return rng_.chance(0.85) ? like : rng_.pick(fuzz_dtypes());
}

std::pair<at::Tensor, std::string> Generator::fill(const std::vector<int64_t>& shape,
                                                   at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  if (n == 0) return {at::empty(shape, dtype), "empty"};
  // A symbolic case draws one seed from the op stream per tensor, so that how many elements a
  // tensor has changes no later op (and a tensor's first elements are the same at every binding).
  std::optional<Rng> own;
  if (symbolic_) own.emplace(static_cast<uint64_t>(rng_.range(0, int64_t{1} << 62)));
  Rng& draw = own ? *own : rng_;
  std::vector<int64_t> ints(n);
  std::string note;
  if (dtype == at::kBool || !is_float(dtype)) {
    int64_t lo = 0, hi = 1;
    if (dtype == at::kBool) {
      const double p = draw.pick<double>({0.5, 0.1, 0.9});
      for (auto& v : ints)
        v = draw.chance(p);
      note = "bernoulli(" + number(p) + ")";
    } else {
      const int64_t big = dtype == at::kInt ? 2147483647LL : (1LL << 62);
      switch (draw.weighted({55, 20, 15, 10})) {
        case 0:
          lo = -10, hi = 10;
          break;
        case 1:
          lo = -1000, hi = 1000;
          break;
        case 2:
          lo = 0, hi = 3;
          break;
        default:
          lo = -big, hi = big;
          break;
      }
      for (auto& v : ints)
        v = draw.range(lo, hi);
      note = "integers uniform in [" + std::to_string(lo) + "," + std::to_string(hi) + "]";
    }
    auto t = at::from_blob(ints.data(), shape, at::kLong).clone().to(dtype);
    return {t, note};
  }
  std::vector<double> values(n);
  const bool half = dtype == at::kHalf;
  switch (draw.weighted({35, 20, 15, 10, 10, 10})) {
    case 0:
      for (auto& v : values)
        v = draw.normal();
      note = "normal(0,1)";
      break;
    case 1: {
      const double s = draw.pick<double>({1e-3, 10, 100, 1e4});
      for (auto& v : values)
        v = (2 * draw.uniform() - 1) * s;
      note = "uniform(-" + number(s) + "," + number(s) + ")";
      break;
    }
    case 2:
      for (auto& v : values)
        v = std::abs(draw.normal()) + 0.05;
      note = "|normal(0,1)|+0.05";
      break;
    case 3: {
      const double e = dtype == at::kDouble ? 100 : half ? 4.5 : 30;
      for (auto& v : values)
        v = (draw.chance(0.5) ? -1 : 1) * std::pow(10.0, (2 * draw.uniform() - 1) * e);
      note = "+-10^uniform(-" + number(e) + "," + number(e) + ")";
      break;
    }
    case 4:
      for (auto& v : values)
        v = static_cast<double>(draw.range(-4, 4));
      note = "integers in [-4,4]";
      break;
    default:
      for (auto& v : values)
        v = draw.normal();
      note = "normal(0,1) with 10% special values";
      for (auto& v : values) {
        if (draw.chance(0.1)) {
          v = draw.pick<double>(
              {kInf, -kInf, std::nan(""), 0.0, -0.0, max_finite(dtype) / 2, min_normal(dtype) / 4});
        }
      }
      break;
  }
  if (n > 0 && draw.chance(0.05)) {
    const double special = draw.pick<double>({kInf, -kInf, std::nan("")});
    values[draw.range(0, n - 1)] = special;
    note += " and one " + number(special);
  }
  auto t = at::from_blob(values.data(), shape, at::kDouble).clone().to(dtype);
  return {t, note};
}

Fresh Generator::fresh(const std::vector<int64_t>& shape, at::ScalarType dtype, bool strided) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> base = shape;
  std::function<at::Tensor(const at::Tensor&)> view = [](const at::Tensor& t) { return t; };
  std::string layout = "contiguous";
  const size_t kind = strided && rank > 0 ? rng_.weighted({70, 10, 8, 7, 5}) : 0;
  if (kind == 1 && rank >= 2) {  // a permutation of a contiguous tensor
    std::vector<int64_t> perm(rank), inverse(rank);
    for (int64_t i = 0; i < rank; ++i)
      perm[i] = i;
    while (std::is_sorted(perm.begin(), perm.end()))
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(rng_.range(0, 1 << 30)));
    for (int64_t i = 0; i < rank; ++i) {
      base[i] = shape[perm[i]];
      inverse[perm[i]] = i;
    }
    view = [inverse](const at::Tensor& t) { return t.permute(inverse); };
    layout = "permute(" + shape_string(inverse) + ") of a contiguous " + shape_string(base);
  } else if (kind == 2) {  // every second element along one dim
    const int64_t d = rng_.range(0, rank - 1), start = rng_.range(0, 1);
    base[d] = 2 * shape[d] + start;
    view = [d, start, n = shape[d]](const at::Tensor& t) {
      return t.slice(d, start, start + 2 * n, 2);
    };
    layout = "slice(dim=" + std::to_string(d) + ", start=" + std::to_string(start) +
             ", step=2) of a contiguous " + shape_string(base);
  } else if (kind == 3) {  // size-1 dims expanded (stride 0)
    for (int64_t d = 0; d < rank; ++d) {
      if (shape[d] > 1 && rng_.chance(0.5)) base[d] = 1;
    }
    view = [shape](const at::Tensor& t) { return t.expand(shape); };
    layout = "expand of a contiguous " + shape_string(base);
  } else if (kind == 4) {  // a storage offset
    const int64_t k = rng_.range(1, 3);
    base[0] = shape[0] + k;
    view = [k, n = shape[0]](const at::Tensor& t) { return t.narrow(0, k, n); };
    layout = "narrow(0, " + std::to_string(k) + ") of a contiguous " + shape_string(base);
  }
  auto [t, values] = fill(base, dtype);
  Fresh f;
  f.tensor = view(t);
  f.note = ir::type_string(*tensor_type_of(f.tensor)) + ", " + layout + ", values " + values;
  return f;
}

int Generator::pick(const Pred& pred) {
  std::vector<int> found, unused;
  for (int i = 0; i < static_cast<int>(pool_.size()); ++i) {
    if (!pred(pool_[i])) continue;
    found.push_back(i);
    if (!pool_[i].leaf && pool_[i].uses == 0) unused.push_back(i);
  }
  if (found.empty()) return -1;
  const double r = rng_.uniform();
  if (r < 0.45) return found.back();
  if (r < 0.7 && !unused.empty()) return rng_.pick(unused);
  return rng_.pick(found);
}

Operand Generator::operand(const Pred& pred, double p_existing, const std::vector<int64_t>& shape,
                           at::ScalarType dtype) {
  if (rng_.chance(p_existing)) {
    if (int i = pick(pred); i >= 0) return {i, {}};
  }
  return {-1, fresh(shape, dtype)};
}

// A second operand that broadcasts with `first`.
Operand Generator::partner(const Operand& first, const Pred& pred, double p_existing) {
  const at::Tensor& t = tensor(first);
  auto compatible = [&](const Val& v) {
    return pred(v) && broadcastable(t.sizes(), v.eager.sizes());
  };
  Operand o =
      operand(compatible, p_existing, partner_shape(t.sizes()), fresh_dtype(t.scalar_type()));
  if (o.val < 0 && rng_.chance(0.1)) {  // a frozen weight instead of an input
    o.fresh = fresh(o.fresh.tensor.sizes().vec(), o.fresh.tensor.scalar_type(), false);
    o.fresh.constant = true;
  }
  return o;
}

ir::Attr Generator::scalar(bool integral) {
  if (integral) return rng_.pick<int64_t>({0, 1, 2, 3, -1, -2, 7});
  return rng_.pick<double>({0.5, -1.5, 2.5, 0.1, 1e-3, 1e3, -7.25, 3.0, 1e10, -0.0});
}

bool Generator::propose(Proposal& p) {
  enum Kind {
    Arith,
    ArithScalar,
    Unary,
    Activation,
    Clamp,
    Pow,
    Compare,
    CompareScalar,
    Where,
    Cast,
    LayoutCopy,
    Reduce,
    Softmax,
    LayerNorm,
    Variance
  };
  const auto kind =
      static_cast<Kind>(rng_.weighted({18, 10, 14, 10, 6, 4, 4, 4, 6, 6, 4, 9, 6, 4, 3}));
  auto any = [](const Val&) { return true; };
  auto floating = [](const Val& v) { return is_float(v.eager.scalar_type()); };
  auto exact_val = [](const Val& v) { return v.exact; };
  auto mostly_float = [&](const Val& v) { return floating(v) || rng_.chance(0.15); };
  const Pred first_pred = kind == Compare || kind == CompareScalar ? Pred(exact_val)
                          : kind >= Reduce                         ? Pred(floating)
                                                                   : Pred(mostly_float);
  Operand a = operand(first_pred, pool_.empty() ? 0.0 : 0.85, shape_, dtype_);
  const bool a_float = is_float(tensor(a).scalar_type());
  auto alpha = [&] {
    switch (rng_.weighted({60, 20, 20})) {
      case 0:
        return ir::Attr(int64_t{1});
      case 1:
        return ir::Attr(rng_.pick<int64_t>({2, -1}));
      default:
        return ir::Attr(rng_.pick<double>({0.5, 1.5, -2.25}));
    }
  };
  switch (kind) {
    case Arith: {
      p.op = rng_.pick<std::string>({"aten::add.Tensor", "aten::sub.Tensor", "aten::rsub.Tensor",
                                     "aten::mul.Tensor", "aten::div.Tensor",
                                     "aten::div.Tensor_mode", "aten::maximum", "aten::minimum"});
      p.args = {a, partner(a, any, 0.5)};
      if (rng_.chance(0.5)) std::swap(p.args[0], p.args[1]);
      if (p.op == "aten::div.Tensor_mode") {
        const size_t m = rng_.weighted({70, 15, 15});
        p.attrs = {{"rounding_mode", m == 0   ? ir::Attr(std::string("trunc"))
                                     : m == 1 ? ir::Attr(std::string("floor"))
                                              : ir::Attr(ir::NoneAttr{})}};
      } else if (p.op.starts_with("aten::add") || p.op.find("sub.") != std::string::npos) {
        p.attrs = {{"alpha", alpha()}};
      }
      return true;
    }
    case ArithScalar: {
      p.op = rng_.pick<std::string>({"aten::add.Scalar", "aten::sub.Scalar", "aten::rsub.Scalar",
                                     "aten::mul.Scalar", "aten::div.Scalar"});
      p.args = {a};
      p.attrs = {{"other", scalar(!a_float && rng_.chance(0.7))}};
      if (!p.op.starts_with("aten::mul") && !p.op.starts_with("aten::div"))
        p.attrs.emplace_back("alpha", alpha());
      return true;
    }
    case Unary:
      p.op =
          rng_.pick<std::string>({"aten::neg", "aten::abs", "aten::exp", "aten::log", "aten::sqrt",
                                  "aten::rsqrt", "aten::reciprocal", "aten::tanh", "aten::sigmoid",
                                  "aten::erf", "aten::sign", "aten::log1p", "aten::expm1"});
      p.args = {a};
      return true;
    case Activation:
      p.op = rng_.pick<std::string>({"aten::relu", "aten::gelu", "aten::silu", "aten::hardswish",
                                     "aten::hardsigmoid", "aten::leaky_relu", "aten::elu",
                                     "aten::softplus", "aten::mish"});
      p.args = {a};
      if (p.op == "aten::gelu")
        p.attrs = {{"approximate", std::string(rng_.chance(0.5) ? "none" : "tanh")}};
      if (p.op == "aten::leaky_relu")
        p.attrs = {{"negative_slope", rng_.pick<ir::Attr>({0.01, 0.2, -0.5, int64_t{0}})}};
      if (p.op == "aten::softplus") {
        p.attrs = {{"beta", rng_.pick<ir::Attr>({int64_t{1}, 2.0, 0.5})},
                   {"threshold", rng_.pick<ir::Attr>({int64_t{20}, 1.0, int64_t{5}})}};
      }
      if (p.op == "aten::elu") {  // elu, selu's constants, celu's input scale (1 / alpha)
        p.attrs = {{"alpha", rng_.pick<ir::Attr>({int64_t{1}, 1.6732632423543772, 0.5})},
                   {"scale", rng_.pick<ir::Attr>({int64_t{1}, 1.0507009873554805})},
                   {"input_scale", rng_.pick<ir::Attr>({int64_t{1}, 2.0})}};
      }
      return true;
    case Clamp: {
      auto bound = [&](bool low) -> ir::Attr {
        if (!a_float || rng_.chance(0.3)) return rng_.pick<int64_t>({-2, -1, 0, 1, 3});
        return low ? rng_.pick<double>({-1.0, -0.5, 0.0, 0.25, 2.0})
                   : rng_.pick<double>({-0.25, 0.0, 0.5, 1.0, 6.0});
      };
      p.op = rng_.pick<std::string>(
          {"aten::clamp", "aten::clamp_min", "aten::clamp_max", "aten::hardtanh"});
      p.args = {a};
      if (p.op == "aten::clamp") {
        const size_t which = rng_.weighted({50, 25, 25});
        p.attrs = {{"min", which == 2 ? ir::Attr(ir::NoneAttr{}) : bound(true)},
                   {"max", which == 1 ? ir::Attr(ir::NoneAttr{}) : bound(false)}};
      } else if (p.op == "aten::clamp_min") {
        p.attrs = {{"min", bound(true)}};
      } else if (p.op == "aten::clamp_max") {
        p.attrs = {{"max", bound(false)}};
      } else {
        p.attrs = {{"min_val", bound(true)}, {"max_val", bound(false)}};
      }
      return true;
    }
    case LayoutCopy: {
      // A copy into another layout (a transposing kernel where the operand is permuted), or
      // into the same one.
      p.op = "aten::clone";
      p.args = {a};
      std::vector<ir::Attr> formats = {ir::Attr(ir::NoneAttr{}), ir::Attr(int64_t{0})};
      if (tensor(a).dim() == 4) formats.push_back(ir::Attr(int64_t{2}));
      p.attrs = {{"memory_format", rng_.pick(formats)}};
      return true;
    }
    case Pow: {
      p.op = "aten::pow.Tensor_Scalar";
      p.args = {a};
      const double e = rng_.pick<double>({2, 3, 0.5, -1, -0.5, -2});
      const bool as_int = e == std::floor(e) && rng_.chance(0.4);
      p.attrs = {{"exponent", as_int ? ir::Attr(static_cast<int64_t>(e)) : ir::Attr(e)}};
      return true;
    }
    case Compare:
    case CompareScalar: {
      const std::string name = rng_.pick<std::string>({"eq", "ne", "lt", "le", "gt", "ge"});
      p.args = {a};
      if (kind == Compare) {
        p.op = "aten::" + name + ".Tensor";
        p.args.push_back(partner(a, exact_val, 0.5));
        return true;
      }
      p.op = "aten::" + name + ".Scalar";
      const at::Tensor& t = tensor(a);
      ir::Attr other = scalar(!a_float);
      if (t.numel() > 0 && rng_.chance(0.6)) {  // an element of the input, maybe nudged
        // A symbolic case reads the first element: the same at every binding for a drawn tensor.
        const int64_t at = rng_.range(0, t.numel() - 1);
        const double x = t.reshape({-1})[symbolic_ ? 0 : at].item<double>();
        const double nudge = rng_.chance(0.4) ? rng_.pick<double>({1e-4, -1e-4, 1e-7}) : 0.0;
        const bool integral = !a_float && nudge == 0 && rng_.chance(0.7) && std::isfinite(x);
        other = integral ? ir::Attr(static_cast<int64_t>(x)) : ir::Attr(x + nudge * std::abs(x));
      }
      p.attrs = {{"other", other}};
      return true;
    }
    case Where: {
      p.op = "aten::where.self";
      auto condition = [&](const Val& v) { return v.exact && v.eager.scalar_type() == at::kBool; };
      Operand c = partner(a, condition, 0.7);
      if (c.val < 0) c.fresh = fresh(c.fresh.tensor.sizes().vec(), at::kBool);
      p.args = {c, a, partner(a, any, 0.5)};
      if (rng_.chance(0.5)) std::swap(p.args[1], p.args[2]);
      return true;
    }
    case Cast: {
      at::ScalarType to = rng_.pick(fuzz_dtypes());
      const at::Tensor& t = tensor(a);
      if (to == t.scalar_type()) return false;
      if (!is_float(to) && a_float) {
        // Float to integer: exact inputs only (a cast is a discontinuity), and only values the
        // integer type holds: out of range kiln gives eager's x86 result (scalar_convert.h), but
        // eager's own result there is not portable, so such elements are never checked.
        const double limit = to == at::kInt ? 2147483647.0 : to == at::kLong ? 9.2e18 : kInf;
        if (!exact(a)) return false;
        if (to != at::kBool &&
            (t.numel() > 0 && (!at::isfinite(t).all().item<bool>() ||
                               t.to(at::kDouble).abs().max().item<double>() >= limit)))
          return false;
      }
      p.op = "aten::_to_copy";
      p.args = {a};
      p.attrs = {{"dtype", static_cast<int64_t>(to)},
                 {"layout", ir::NoneAttr{}},
                 {"device", ir::NoneAttr{}},
                 {"pin_memory", ir::NoneAttr{}},
                 {"non_blocking", false},
                 {"memory_format", ir::NoneAttr{}}};
      return true;
    }
    case Reduce: {
      if (last_reduction_.input >= 0 && rng_.chance(0.6)) {
        p.op = rng_.pick<std::string>(
            {"aten::sum.dim_IntList", "aten::mean.dim", "aten::amax", "aten::amin"});
        p.args = {Operand{last_reduction_.input, {}}};
        p.attrs = {{"dim", last_reduction_.dims}, {"keepdim", last_reduction_.keepdim}};
        if (p.op != "aten::amax" && p.op != "aten::amin")
          p.attrs.emplace_back("dtype", ir::NoneAttr{});
        return true;
      }
      const int64_t rank = tensor(a).dim();
      p.op = rng_.pick<std::string>({"aten::sum.dim_IntList", "aten::sum.dim_IntList",
                                     "aten::mean.dim", "aten::mean.dim", "aten::amax", "aten::amin",
                                     "aten::sum", "aten::mean"});
      p.args = {a};
      if (p.op == "aten::sum" || p.op == "aten::mean") {
        p.attrs = {{"dtype", ir::NoneAttr{}}};
        return true;
      }
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < rank; ++d) {
        if (rng_.chance(0.4)) dims.push_back(rng_.chance(0.3) ? d - rank : d);
      }
      if (dims.empty() && rank > 0 && rng_.chance(0.85))
        dims.push_back(rng_.range(-rank, rank - 1));
      const bool keepdim = rng_.chance(0.5);
      p.attrs = {{"dim", dims}, {"keepdim", keepdim}};
      if (p.op != "aten::amax" && p.op != "aten::amin")
        p.attrs.emplace_back("dtype", ir::NoneAttr{});
      if (a.val >= 0) last_reduction_ = {a.val, dims, keepdim};
      return true;
    }
    case Softmax: {
      const int64_t rank = std::max<int64_t>(tensor(a).dim(), 1);
      p.op = rng_.chance(0.5) ? "aten::softmax.int" : "aten::log_softmax.int";
      p.args = {a};
      p.attrs = {{"dim", rng_.range(-rank, rank - 1)}, {"dtype", ir::NoneAttr{}}};
      return true;
    }
    case LayerNorm: {
      const at::Tensor& t = tensor(a);
      if (t.dim() == 0) return false;
      const int64_t k = std::min<int64_t>(t.dim(), rng_.range(1, 2));
      std::vector<int64_t> normalized(t.sizes().end() - k, t.sizes().end());
      p.op = "aten::layer_norm";
      p.args = {a};
      p.attrs = {{"normalized_shape", normalized}};
      for (const char* name : {"weight", "bias"}) {
        if (rng_.chance(0.7)) {
          Fresh f = fresh(normalized, rng_.chance(0.85) ? t.scalar_type() : at::kFloat, false);
          f.constant = rng_.chance(0.5);
          p.args.push_back({-1, f});
        } else {
          p.attrs.emplace_back(name, ir::NoneAttr{});
        }
      }
      p.attrs.emplace_back("eps", rng_.pick<double>({1e-5, 1e-6, 1e-3, 0.1}));
      p.attrs.emplace_back("cudnn_enable", true);
      return true;
    }
    case Variance: {
      // var and std as FX writes them (dim list, correction); TorchScript's unbiased= overloads
      // lower through the same code (tests/kernel/lower_variance_test.cpp).
      const at::Tensor& t = tensor(a);
      // ATen warns of no degrees of freedom for every empty input, even where its output is empty.
      if (t.numel() == 0) return false;
      const int64_t rank = t.dim();
      p.op = rng_.chance(0.5) ? "aten::var.correction" : "aten::std.correction";
      p.args = {a};
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < rank; ++d) {
        if (rng_.chance(0.4)) dims.push_back(rng_.chance(0.3) ? d - rank : d);
      }
      if (dims.empty() && rank > 0 && rng_.chance(0.85))
        dims.push_back(rng_.range(-rank, rank - 1));
      const ir::Attr correction =
          rng_.pick<ir::Attr>({int64_t{1}, int64_t{1}, int64_t{0}, 0.5, ir::NoneAttr{}});
      // No degrees of freedom left: ATen's inf or NaN, which kiln leaves to ATen (and ATen warns).
      int64_t n = dims.empty() ? t.numel() : 1;  // an empty list reduces every dim
      for (int64_t d : dims)
        n *= t.size(d);
      const double c =
          std::holds_alternative<ir::NoneAttr>(correction) ? 1 : scalar_value(correction);
      if (static_cast<double>(n) - c <= 0) return false;
      p.attrs = {{"dim", dims}, {"correction", correction}, {"keepdim", rng_.chance(0.5)}};
      return true;
    }
  }
  return false;
}

int Generator::commit(Fresh& f) {
  const ir::TensorType type = *tensor_type_of(f.tensor);
  Val v = leaf_val(f.tensor);
  if (symbolic_ && f.constant) {
    // A frozen weight never moves with the sizes: one with a dim of a size input's value is most
    // likely a copy of the main shape, made an input instead.
    for (int64_t s : f.tensor.sizes()) {
      for (int d : case_.size_dims)
        f.constant = f.constant && s != shape_[d];
    }
  }
  if (f.constant) {
    const int64_t index = static_cast<int64_t>(case_.constants.size());
    case_.constants.push_back(f.tensor);
    v.value = case_.graph->append("prim::Constant", {}, {type}, {{"index", index}})->output();
    v.value->set_name("w" + std::to_string(index));
    constant_notes_.push_back("%" + v.value->name() + " = constant " + f.note);
  } else {
    v.value = case_.graph->add_input(type, "x" + std::to_string(case_.inputs.size()));
    case_.inputs.push_back(f.tensor);
    case_.input_notes.push_back("%" + v.value->name() + " : " + f.note);
  }
  pool_.push_back(std::move(v));
  return static_cast<int>(pool_.size()) - 1;
}

bool Generator::apply(Proposal& p) {
  std::vector<Val> fresh_vals;
  fresh_vals.reserve(p.args.size());
  std::vector<const Val*> ins;
  std::vector<at::Tensor> tensors;
  bool all_exact = true;
  for (const Operand& o : p.args) {
    if (o.val >= 0) {
      ins.push_back(&pool_[o.val]);
    } else {
      fresh_vals.push_back(leaf_val(o.fresh.tensor));
      ins.push_back(&fresh_vals.back());
    }
    tensors.push_back(ins.back()->eager);
    all_exact &= ins.back()->exact;
  }
  at::Tensor out;
  try {
    out = call_op(p.op, tensors, p.attrs);
  } catch (const c10::Error&) {
    return false;  // ATen rejects this combination: pick again
  }
  auto type = tensor_type_of(out);
  const auto& dtypes = fuzz_dtypes();
  if (!type || out.numel() > kMaxNumel ||
      std::find(dtypes.begin(), dtypes.end(), out.scalar_type()) == dtypes.end())
    return false;
  // Integers and bools are compared exactly: they must not depend on inexact floats.
  if (!all_exact && !is_float(out.scalar_type())) return false;
  Val v;
  v.eager = out;
  v.v64 = as64(out);
  v.exact = all_exact && exact_op(p.op, out.scalar_type(), p.attrs, ins);
  // kiln's kernels do not contract multiply-add into FMA (kKilnContractsFma): products round
  // as in eager, and adding to one is exact.
  v.product =
      kKilnContractsFma && is_float(out.scalar_type()) && ends_in_product(p.op, p.attrs, ins);
  try {
    v.bound = v.exact ? at::zeros(out.sizes(), at::kDouble)
                      : error_bound(p.op, p.attrs, ins, v.v64, out.scalar_type());
  } catch (const c10::Error&) {
    return false;  // the float64 evaluation of the bound is not possible for these operands
  }
  std::vector<ir::Value*> values;
  for (Operand& o : p.args) {
    if (o.val < 0) o.val = commit(o.fresh);
    ++pool_[o.val].uses;
    values.push_back(pool_[o.val].value);
  }
  v.value = case_.graph->append(p.op, values, {*type}, p.attrs)->output();
  pool_.push_back(std::move(v));
  ++case_.num_ops;
  return true;
}

FuzzCase Generator::run() {
  zero_sizes_ = rng_.chance(0.06);
  shape_ = random_shape(static_cast<int>(rng_.weighted({7, 18, 35, 25, 15})));
  if (large_ && !shape_.empty()) {
    // Doubling the largest dim draws nothing from rng_: the ops are the small case's.
    auto numel = [&] {
      int64_t n = 1;
      for (int64_t s : shape_)
        n *= s;
      return n;
    };
    while (numel() > 0 && numel() < (int64_t{1} << 16))
      *std::max_element(shape_.begin(), shape_.end()) *= 2;
  }
  if (symbolic_) choose_size_dims();
  dtype_ = std::vector<at::ScalarType>{at::kFloat,    at::kDouble, at::kHalf,
                                       at::kBFloat16, at::kInt,    at::kLong}[rng_.weighted(
      {60, 10, 10, 10, 5, 5})];
  const int target = static_cast<int>(rng_.range(2, 12));
  for (int attempt = 0; case_.num_ops < target && attempt < 400; ++attempt) {
    Proposal p;
    if (propose(p)) apply(p);
  }
  // Outputs: every unused result, and some results that are also used.
  std::vector<ir::Value*> outputs;
  for (const Val& v : pool_) {
    const bool chosen = v.uses == 0 || rng_.chance(0.2);  // draws the same with all_outputs_
    if (!v.leaf && (chosen || all_outputs_)) {
      outputs.push_back(v.value);
      case_.expected.push_back(v.eager);
      case_.bounds.push_back(v.bound);
    }
  }
  case_.graph->set_outputs(outputs);
  case_.ir_text = ir::print_graph(*case_.graph);
  for (const auto& note : constant_notes_)
    case_.input_notes.push_back(note);
  return std::move(case_);
}

void Generator::choose_size_dims() {
  // From a stream of its own: the ops are the same whichever dims move.
  Rng choose(case_.seed ^ 0x5151);
  std::vector<int> candidates;
  for (int d = 0; d < static_cast<int>(shape_.size()); ++d) {
    if (shape_[d] >= 2) candidates.push_back(d);
  }
  std::shuffle(candidates.begin(), candidates.end(), std::mt19937_64(choose.range(0, 1 << 30)));
  candidates.resize(std::min<size_t>(candidates.size(), choose.chance(0.7) ? 1 : 2));
  std::sort(candidates.begin(), candidates.end());
  case_.size_dims = candidates;
  if (binding_.empty()) {
    for (int d : candidates)
      case_.binding.push_back(shape_[d]);
    return;
  }
  if (binding_.size() != candidates.size())
    throw std::invalid_argument("kiln_fuzz: seed " + std::to_string(case_.seed) + " has " +
                                std::to_string(candidates.size()) + " size inputs, the binding " +
                                std::to_string(binding_.size()));
  for (size_t i = 0; i < candidates.size(); ++i)
    shape_[candidates[i]] = binding_[i];
  case_.binding = binding_;
}

}  // namespace

FuzzCase make_case(uint64_t seed, bool all_outputs, bool large) {
  return Generator(seed, all_outputs, large).run();
}

FuzzCase make_symbolic_case(uint64_t seed, std::span<const int64_t> binding) {
  return Generator(seed, binding).run();
}

}  // namespace kiln::fuzz
