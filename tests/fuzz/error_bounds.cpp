#include "fuzz/error_bounds.h"

#include <algorithm>
#include <set>

#include "fuzz/fuzz_support.h"

namespace kiln::fuzz {

at::Tensor as64(const at::Tensor& t) {
  return t.to(at::kDouble).contiguous();
}

Val leaf_val(const at::Tensor& t) {
  Val v;
  v.eager = t;
  v.v64 = as64(t);
  v.bound = at::zeros(t.sizes(), at::kDouble);
  v.leaf = true;
  return v;
}

namespace {

/// The last step of every bound: where the eager result is finite, a NaN bound or one that
/// reaches past the largest finite value means "not checked" (inf); where it is not finite, it
/// must match exactly where `strict`, else it is not checked.
at::Tensor finalize(const at::Tensor& r, at::Tensor e, at::Tensor strict, at::ScalarType out) {
  e = at::broadcast_to(e, r.sizes());
  strict = at::broadcast_to(strict, r.sizes());
  const auto finite = at::isfinite(r);
  const auto inf = at::full_like(r, kInf);
  e = at::where(at::isnan(e), inf, e);
  e = at::where(finite & (r.abs() + e > max_finite(out)), inf, e);
  return at::where(finite, e, at::where(strict, at::zeros_like(r), inf)).contiguous();
}

/// Units of roundoff an elementwise op may lose, eager and kiln together.
double op_ulps(const std::string& op) {
  static const std::set<std::string> transcendental = {"aten::exp",     "aten::log", "aten::tanh",
                                                       "aten::sigmoid", "aten::erf", "aten::log1p",
                                                       "aten::expm1",   "aten::elu"};
  static const std::set<std::string> roots = {"aten::sqrt", "aten::rsqrt", "aten::reciprocal"};
  if (transcendental.contains(op)) return 8;
  if (roots.contains(op)) return 4;
  if (op == "aten::gelu" || op == "aten::silu" || op.starts_with("aten::pow")) return 16;
  // exp, log1p and a division or tanh in a row
  if (op == "aten::softplus" || op == "aten::mish") return 16;
  if (op == "aten::hardswish" || op == "aten::hardsigmoid") return 4;
  return 2;
}

/// An elementwise op: evaluated in float64 at the corners of its inputs' error boxes (each
/// widened by one unit roundoff of the result type); bool inputs are exact and kept as they are.
at::Tensor elementwise_bound(const std::string& op, const ir::AttrList& attrs,
                             const std::vector<const Val*>& ins, const at::Tensor& r,
                             at::ScalarType out) {
  const double u = unit_roundoff(out);
  std::vector<at::Tensor> center, widen;
  auto z = at::zeros_like(r);
  const bool adds =
      op.starts_with("aten::add.") || op.starts_with("aten::sub.") || op.starts_with("aten::rsub.");
  for (const Val* v : ins) {
    // A product kiln may fuse into this add keeps its unrounded, unoverflowed value: where eager's
    // product is not finite, nothing is certain.
    if (adds && v->product) z = z + at::where(at::isfinite(v->v64), 0.0, kInf);
    if (v->eager.scalar_type() == at::kBool) {
      center.push_back(v->eager);
      widen.emplace_back();
      continue;
    }
    const auto finite = at::isfinite(v->v64);
    center.push_back(v->v64);
    widen.push_back(at::where(finite, v->bound + u * v->v64.abs(), v->bound));
    z = z + v->bound;
  }
  // alpha * y: eager's kernels add it in one FMA, kiln multiplies first. Where the product alone
  // overflows, kiln's sum is infinite and eager's may not be: nothing is certain there.
  const ir::Attr* alpha = find_attr(attrs, "alpha");
  at::Tensor overflow;
  if (adds && alpha && ins.size() == 2 && scalar_value(*alpha) != 1) {
    const Val& scaled = *ins[op.starts_with("aten::rsub.") ? 0 : 1];
    overflow = std::abs(scalar_value(*alpha)) * scaled.v64.abs() > max_finite(compute_type(out));
    z = z + at::where(overflow, kInf, 0.0);
  }
  at::Tensor lo, hi, all_nan;  // lo and hi are NaN where any corner is
  const int n = static_cast<int>(ins.size());
  for (int corner = 0; corner < (1 << n); ++corner) {
    std::vector<at::Tensor> args;
    bool duplicate = false;
    for (int i = 0; i < n; ++i) {
      const bool up = (corner >> i) & 1;
      if (!widen[i].defined()) {
        duplicate |= up;
        args.push_back(center[i]);
      } else {
        args.push_back(up ? center[i] + widen[i] : center[i] - widen[i]);
      }
    }
    if (duplicate) continue;
    const at::Tensor f = as64(call_op(op, args, attrs));
    lo = lo.defined() ? at::minimum(lo, f) : f;
    hi = hi.defined() ? at::maximum(hi, f) : f;
    all_nan = all_nan.defined() ? all_nan & at::isnan(f) : at::isnan(f);
  }
  const double c = op_ulps(op);
  auto dev = at::maximum((hi - r).abs(), (lo - r).abs());
  auto e = 2 * dev + c * u * r.abs() + c * min_normal(out);
  if (overflow.defined()) e = at::where(at::broadcast_to(overflow, r.sizes()), kInf, e);
  // An input not checked (an infinite bound) may be anything in kiln, NaN included, which no
  // corner of its box gives: an op that maps NaN to a number (sign) or ±inf to numbers
  // (hardsigmoid) would bound what it cannot know. So is an input whose eager value is NaN but
  // not certain.
  for (const Val* v : ins) {
    if (v->eager.scalar_type() == at::kBool) continue;
    const auto unknown = ~at::isfinite(v->bound) | (at::isnan(v->v64) & (v->bound != 0));
    e = at::where(at::broadcast_to(unknown, r.sizes()), kInf, e);
  }
  // At a pole (a divisor, or the argument of 1/x, 1/sqrt(x), x^-k, whose interval holds 0) the
  // corners do not bound the result.
  size_t pole = n;
  if (op.starts_with("aten::div.Tensor")) pole = 1;
  if (op == "aten::reciprocal" || op == "aten::rsqrt") pole = 0;
  if (op == "aten::pow.Tensor_Scalar" && scalar_value(*find_attr(attrs, "exponent")) < 0) pole = 0;
  if (pole < static_cast<size_t>(n) && widen[pole].defined()) {
    const auto& x = center[pole];
    const auto& w = widen[pole];
    e = at::where(at::broadcast_to((w > 0) & (x - w <= 0) & (x + w >= 0), r.sizes()), kInf, e);
  }
  // gelu is x/2 (1 + erf(x/sqrt2)) (or tanh) in eager and kiln alike: for x < -3 the sum cancels,
  // and both lose precision relative to |x|, not to the result.
  if (op == "aten::gelu") e = e + c * u * center[0].abs();
  // A non-finite result is checked where every corner gives it too (the inputs' bounds being
  // finite), evaluated in float64 and rounded to the type kiln computes in (kiln does not round
  // half intermediates). Where the float64 op gives something else, eager's special value is an
  // artifact of its float32 or half kernel (gelu(+inf) is NaN in float32, +inf in float64), not
  // a semantics to copy.
  const at::ScalarType ct = compute_type(out);
  auto agree = (all_nan & at::isnan(r)) | ((as64(lo.to(ct)) == r) & (as64(hi.to(ct)) == r));
  return finalize(r, e, at::isfinite(z) & agree, out);
}

std::vector<int64_t> reduced_dims(const ir::AttrList& attrs, int64_t rank) {
  const ir::Attr* attr = find_attr(attrs, "dim");
  std::vector<int64_t> dims;
  if (attr) {
    if (auto* list = std::get_if<std::vector<int64_t>>(attr)) dims = *list;
    if (auto* one = std::get_if<int64_t>(attr)) dims = {*one};
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d);
  }
  return dims;
}

/// sum, mean, amax, amin: the accumulated input bounds plus 4 n u sum|x| for the sums.
at::Tensor reduction_bound(const std::string& op, const ir::AttrList& attrs, const Val& in,
                           const at::Tensor& r, at::ScalarType out) {
  const int64_t rank = in.eager.dim();
  const auto dims = reduced_dims(attrs, rank);
  const ir::Attr* keep = find_attr(attrs, "keepdim");
  const bool keepdim = keep && std::get_if<bool>(keep) && std::get<bool>(*keep);
  const auto& a = in.v64;
  if (op == "aten::amax" || op == "aten::amin") {
    auto e = at::amax(in.bound, dims, keepdim);
    return finalize(r, e, at::isfinite(e), out);
  }
  int64_t n = 1;
  for (int64_t d : dims)
    n *= in.eager.size(d);
  const double acc = unit_roundoff(compute_type(out)), u = unit_roundoff(out);
  const auto finite = at::isfinite(a);
  auto sum_abs = at::sum(at::where(finite, a.abs(), 0.0), dims, keepdim);
  auto sum_bound = at::sum(in.bound, dims, keepdim);
  auto e = sum_bound + 4 * acc * static_cast<double>(n) * sum_abs;
  if (op.starts_with("aten::mean")) e = e / static_cast<double>(std::max<int64_t>(n, 1));
  e = e + 4 * u * r.abs() + 4 * min_normal(out);
  // Partial sums may overflow in one order and not in another; eager's threads keep theirs in
  // the output's type (a float16 sum accumulates in float32, but two threads' partials of
  // 4e7 and -inf meet as float16: inf - inf, NaN; large fuzz seed 853).
  const auto overflow = sum_abs > max_finite(out);
  e = at::where(overflow, kInf, e);
  const auto nonfinite_in = at::sum((~finite).to(at::kLong), dims, keepdim) > 0;
  // A non-finite input decides a non-finite sum when the other elements are bounded.
  auto strict = at::isfinite(sum_bound) & nonfinite_in & ~overflow;
  if (n == 0) strict = at::ones_like(strict);  // mean of nothing is NaN, sum 0: both certain
  return finalize(r, e, strict, out);
}

/// softmax and log_softmax: a shift of every input by at most d changes softmax by a factor
/// within exp(+-2d) and log_softmax by at most 2d; rounding is relative to n and |x - max|.
at::Tensor softmax_bound(bool log, const ir::AttrList& attrs, const Val& in, const at::Tensor& r,
                         at::ScalarType out) {
  const auto& a = in.v64;
  if (a.numel() == 0) return at::zeros_like(r);
  const int64_t dim = std::get<int64_t>(*find_attr(attrs, "dim"));
  const int64_t d = a.dim() == 0 ? 0 : (dim < 0 ? dim + a.dim() : dim);
  const auto a1 = a.dim() == 0 ? a.reshape({1}) : a;  // softmax of a 0-dim tensor: one element
  const auto b1 = a.dim() == 0 ? in.bound.reshape({1}) : in.bound;
  const auto r1 = a.dim() == 0 ? r.reshape({1}) : r;
  const double n = static_cast<double>(a1.size(d));
  const double acc = unit_roundoff(compute_type(out)), u = unit_roundoff(out);
  auto delta = at::amax(b1, {d}, true);
  auto max = at::amax(a1, {d}, true);
  auto spread = (a1 - max).abs();
  at::Tensor e;
  if (log) {
    auto lse = at::logsumexp(a1, {d}, true);
    // Eager's half kernels round the sum, and max + log(sum), to the half type.
    e = 2 * delta + 8 * acc * (spread + (lse - max).abs() + n + r1.abs()) + 8 * u * (lse.abs() + 1);
  } else {
    auto rel = at::expm1(2 * delta) + 8 * acc * (spread + n + 2);
    // Where eager's exp(x - max) underflowed to 0, kiln's inputs, off by at most delta, give at
    // most exp(x - max + 2 delta) (the sum being at least 1): nothing, unless delta is large.
    e = at::where(r1 == 0, at::exp(a1 - max + 2 * delta), r1.abs() * rel);
  }
  e = e + 8 * u * r1.abs() + 8 * min_normal(out);
  // An input not checked makes its row unknown, zeros included.
  e = at::where(at::isfinite(delta), e, kInf);
  const auto nonfinite_in = at::sum((~at::isfinite(a1)).to(at::kLong), {d}, true) > 0;
  return finalize(r1, e, at::isfinite(delta) & nonfinite_in, out).reshape(r.sizes());
}

/// layer_norm: x^ = (x - mean) / sqrt(var + eps) moves by at most d (2 + |x^|) / sigma for input
/// errors d; the mean and variance round relative to n max|x| / sigma.
at::Tensor layer_norm_bound(const ir::AttrList& attrs, const std::vector<const Val*>& ins,
                            const at::Tensor& r, at::ScalarType out) {
  const Val& in = *ins[0];
  const auto& a = in.v64;
  const auto shape = std::get<std::vector<int64_t>>(*find_attr(attrs, "normalized_shape"));
  std::vector<int64_t> dims;
  double n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims.push_back(a.dim() - static_cast<int64_t>(shape.size()) + static_cast<int64_t>(i));
    n *= static_cast<double>(shape[i]);
  }
  if (a.numel() == 0) return at::zeros_like(r);
  const double eps = std::get<double>(*find_attr(attrs, "eps"));
  const double acc = unit_roundoff(compute_type(out)), u = unit_roundoff(out);
  const auto finite = at::isfinite(a);
  auto mean = at::mean(a, dims, true);
  auto sigma = at::sqrt(at::mean(at::square(a - mean), dims, true) + eps);
  auto xhat = (a - mean) / sigma;
  auto delta = at::amax(in.bound, dims, true);
  auto max_abs = at::amax(at::where(finite, a.abs(), 0.0), dims, true);
  auto e_xhat =
      delta * (2 + xhat.abs()) / sigma + 8 * acc * n * (max_abs / sigma) * (1 + xhat.abs());
  at::Tensor w = at::ones({}, at::kDouble), ew = at::zeros({}, at::kDouble);
  at::Tensor b = at::zeros({}, at::kDouble), eb = at::zeros({}, at::kDouble);
  size_t next = 1;
  if (!find_attr(attrs, "weight")) w = ins[next]->v64, ew = ins[next]->bound, ++next;
  if (!find_attr(attrs, "bias")) b = ins[next]->v64, eb = ins[next]->bound;
  auto e = e_xhat * w.abs() + xhat.abs() * ew + eb + 8 * acc * (xhat * w).abs() + 8 * u * r.abs() +
           8 * min_normal(out);
  // The variance may overflow in the accumulation type where it does not in float64.
  const auto overflow = max_abs * max_abs * n > max_finite(compute_type(out));
  e = at::where(overflow, kInf, e);
  // A non-finite input makes its whole row NaN; a non-finite weight or bias decides the result
  // when everything is exact (times a normalized value near 0, its sign is not certain).
  const auto nonfinite_row = at::sum((~finite).to(at::kLong), dims, true) > 0;
  const auto nonfinite_src = nonfinite_row | ~at::isfinite(w) | ~at::isfinite(b);
  const auto z = delta + ew + eb;
  // But an infinite weight times an x^ within its rounding of 0 (any row of one element) is
  // the sign of a rounding residue in eager (its x * rstd - mean * rstd may be one fused
  // multiply-add) and NaN in kiln, which subtracts first: neither is owed.
  const auto undetermined = ~at::isfinite(w) & (xhat.abs() <= e_xhat);
  const auto strict =
      ((at::isfinite(z) & nonfinite_row) | ((z == 0) & nonfinite_src & ~overflow)) & ~undetermined;
  return finalize(r, e, strict, out);
}

/// var and std: input errors of at most D over a group move each deviation from the mean by at
/// most 2D, so the mean of squares by at most 4D max|x - mean| + 4D^2. Rounding: kiln's and
/// eager's sums of squares, of deviations from a shift within the group's range (kiln's one pass
/// shifts by the row's first vector), lose at most (n + 3) acc of a sum whose terms are at most
/// (2 max|x|)^2; 32 n acc max|x|^2 covers it for every n >= 1. Then n / (n - correction) scales
/// it, and std takes the root: |sqrt(v + e) - sqrt(v)| <= e / (sqrt(v) + sqrt(max(v - e, 0))),
/// which is large where the variance is within its error of 0.
at::Tensor variance_bound(bool root, const ir::AttrList& attrs, const Val& in, const at::Tensor& r,
                          at::ScalarType out) {
  const auto& a = in.v64;
  const auto dims = reduced_dims(attrs, a.dim());
  const ir::Attr* keep = find_attr(attrs, "keepdim");
  const bool keepdim = keep && std::get_if<bool>(keep) && std::get<bool>(*keep);
  const ir::Attr* corr = find_attr(attrs, "correction");
  const double c = !corr || std::holds_alternative<ir::NoneAttr>(*corr) ? 1 : scalar_value(*corr);
  double n = 1;
  for (int64_t d : dims)
    n *= static_cast<double>(a.size(d));
  const double acc = unit_roundoff(compute_type(out)), u = unit_roundoff(out);
  const auto finite = at::isfinite(a);
  const auto finite_a = at::where(finite, a, 0.0);
  const auto mean = at::mean(finite_a, dims, true);
  const auto max_abs = at::amax(finite_a.abs(), dims, keepdim);
  const auto max_dev = at::amax(at::where(finite, (a - mean).abs(), 0.0), dims, keepdim);
  const auto d = at::amax(in.bound, dims, keepdim);
  // Squares below the accumulation type's smallest normal lose their digits in kiln; eager's
  // float32 var accumulates in float64. Each costs at most that smallest normal.
  const double underflow = n * min_normal(compute_type(out));
  const auto e_var =
      n / (n - c) * (4 * d * max_dev + 4 * d * d + 32 * acc * n * max_abs * max_abs + underflow);
  at::Tensor e = e_var;
  if (root) {
    const auto var = r * r;
    e = at::where(e_var == 0, 0.0,
                  e_var / (at::sqrt(var) + at::sqrt(at::clamp_min(var - e_var, 0.0))));
  }
  e = e + 4 * (u + acc) * r.abs() + 4 * min_normal(out);
  // Squares of deviations from a shift may overflow in the accumulation type.
  const auto overflow = 4 * max_abs * max_abs * n > max_finite(compute_type(out));
  e = at::where(overflow, kInf, e);
  // A non-finite value makes its group's variance NaN, in kiln as in eager.
  const auto nonfinite = at::sum((~finite).to(at::kLong), dims, keepdim) > 0;
  return finalize(r, e, at::isfinite(d) & nonfinite & ~overflow, out);
}

}  // namespace

/// True when kiln's last step for `op` is a multiply (which LLVM may contract with a following
/// add or subtract into one FMA: no rounding, and no overflow, of the product in between).
bool ends_in_product(const std::string& op, const ir::AttrList& attrs,
                     const std::vector<const Val*>& ins) {
  if (op.starts_with("aten::mul.") || op == "aten::gelu" || op == "aten::silu") return true;
  if (op == "aten::neg") return ins[0]->product;
  if (op == "aten::pow.Tensor_Scalar") {
    const double x = scalar_value(*find_attr(attrs, "exponent"));
    return x == 2 || x == 3;  // x * x, x * x * x
  }
  return op == "aten::layer_norm" && !find_attr(attrs, "weight") && find_attr(attrs, "bias");
}

/// Ops whose float results kiln computes exactly as eager does, given exact inputs.
bool exact_op(const std::string& op, at::ScalarType out, const ir::AttrList& attrs,
              const std::vector<const Val*>& ins) {
  if (!is_float(out)) return true;  // integer arithmetic, comparisons, casts of exact values
  static const std::set<std::string> selections = {
      "aten::neg",  "aten::abs",  "aten::relu",    "aten::where.self", "aten::_to_copy",
      "aten::amax", "aten::amin", "aten::maximum", "aten::minimum",    "aten::sign"};
  const bool half = out != at::kFloat && out != at::kDouble;
  if (op == "aten::where.self" && half) {
    // A branch promoted to half is rounded by eager, held in float32 by kiln.
    return ins[1]->eager.scalar_type() == out && ins[2]->eager.scalar_type() == out;
  }
  if (selections.contains(op)) return true;
  // Half results: kiln keeps intermediates in float32 where eager rounds each op.
  if (half) return false;
  static const std::set<std::string> clamps = {"aten::clamp", "aten::clamp_min", "aten::clamp_max",
                                               "aten::hardtanh"};
  if (clamps.contains(op) || op.starts_with("aten::mul.")) return true;
  if (op.starts_with("aten::add.") || op.starts_with("aten::sub.") ||
      op.starts_with("aten::rsub.")) {
    for (const Val* v : ins) {
      if (v->product) return false;
    }
    const ir::Attr* alpha = find_attr(attrs, "alpha");
    return !alpha || scalar_value(*alpha) == 1;  // else eager and kiln may round alpha * y apart
  }
  return false;
}

at::Tensor error_bound(const std::string& op, const ir::AttrList& attrs,
                       const std::vector<const Val*>& ins, const at::Tensor& r,
                       at::ScalarType out) {
  if (op == "aten::sum" || op == "aten::sum.dim_IntList" || op == "aten::mean" ||
      op == "aten::mean.dim" || op == "aten::amax" || op == "aten::amin")
    return reduction_bound(op, attrs, *ins[0], r, out);
  if (op == "aten::softmax.int") return softmax_bound(false, attrs, *ins[0], r, out);
  if (op == "aten::log_softmax.int") return softmax_bound(true, attrs, *ins[0], r, out);
  if (op == "aten::layer_norm") return layer_norm_bound(attrs, ins, r, out);
  if (op == "aten::var.correction") return variance_bound(false, attrs, *ins[0], r, out);
  if (op == "aten::std.correction") return variance_bound(true, attrs, *ins[0], r, out);
  return elementwise_bound(op, attrs, ins, r, out);
}

}  // namespace kiln::fuzz
