#include "backend/codegen/llvm/math.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

// Branch-free float32 approximations. Every function works lane-wise on a scalar or a vector, so
// the same emitter serves the vectorized body and the scalar tail of a loop. Special inputs are
// handled by selects at the end rather than by branches, and out-of-range inputs are clamped
// first so that the main path never computes with values that would make its integer tricks
// meaningless. Polynomial coefficients are near-minimax fits (weighted least squares iterated
// towards minimax, computed with mpmath in 40-digit arithmetic) rounded to float.

namespace kiln::codegen {
namespace {

using llvm::Type;
using llvm::Value;
using llvm::Intrinsic::ID;

// ConstantFP::get and ConstantInt::get splat over vector types, so one helper serves both forms.
Value* fconst(Type* ty, double v) {
  return llvm::ConstantFP::get(ty, v);
}
Type* int_type(Type* fty) {
  return fty->getWithNewType(llvm::Type::getInt32Ty(fty->getContext()));
}
Value* iconst(Type* fty, int32_t v) {
  return llvm::ConstantInt::get(int_type(fty), static_cast<uint64_t>(v), /*IsSigned=*/true);
}

Value* unary(llvm::IRBuilderBase& b, ID id, Value* x) {
  return b.CreateUnaryIntrinsic(id, x);
}
Value* binary(llvm::IRBuilderBase& b, ID id, Value* x, Value* y) {
  return b.CreateBinaryIntrinsic(id, x, y);
}

// a * c + d. fmuladd rather than fma: fma becomes a call to fmaf on targets without a fused
// instruction, while fmuladd falls back to a multiply and an add. Every use below tolerates either.
Value* mul_add(llvm::IRBuilderBase& b, Value* a, Value* c, Value* d) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, c, d});
}

// c[0] + c[1] x + c[2] x^2 + ..., by Horner's rule.
Value* poly(llvm::IRBuilderBase& b, Value* x, std::initializer_list<double> c) {
  Type* ty = x->getType();
  const double* it = c.end();
  Value* acc = fconst(ty, *--it);
  while (it != c.begin())
    acc = mul_add(b, acc, x, fconst(ty, *--it));
  return acc;
}

// The main paths clamp (minnum drops a NaN) or take integer bits, so NaN is restored at the end.
// x + x rather than x: it quiets a signaling NaN, as the C library does.
Value* keep_nan(llvm::IRBuilderBase& b, Value* x, Value* result) {
  return b.CreateSelect(b.CreateFCmpUNO(x, x), b.CreateFAdd(x, x), result);
}

// 2^k for integer lanes k in [-126, 127], built in the exponent field.
Value* pow2(llvm::IRBuilderBase& b, Value* k, Type* fty) {
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, iconst(fty, 127)), 23), fty);
}

// min(max(x, lo), hi) with compare-and-select, so a NaN passes through (each compare is false).
// No upper clamp without `hi`.
Value* clamp_keeping_nan(llvm::IRBuilderBase& b, Value* x, double lo, std::optional<double> hi) {
  Type* ty = x->getType();
  Value* above = b.CreateSelect(b.CreateFCmpOLT(x, fconst(ty, lo)), fconst(ty, lo), x);
  if (!hi) return above;
  return b.CreateSelect(b.CreateFCmpOGT(above, fconst(ty, *hi)), fconst(ty, *hi), above);
}

int lanes_of(Type* ty) {
  auto* vec = llvm::dyn_cast<llvm::FixedVectorType>(ty);
  return vec ? static_cast<int>(vec->getNumElements()) : 1;
}

bool has_scalef(Type* ty, MathTarget target) {
  const int lanes = lanes_of(ty);
  return target.avx512 && lanes > 1 && (lanes == 4 || lanes == 8 || lanes % 16 == 0);
}

// p * 2^floor(n), rounded once (vscalefps): 4, 8 or 16 lanes per instruction; wider vectors in
// pieces of 16.
Value* scalef(llvm::IRBuilderBase& b, Value* p, Value* n) {
  const int lanes = lanes_of(p->getType());
  if (lanes > 16) {
    std::vector<Value*> pieces;
    for (int at = 0; at < lanes; at += 16) {
      std::vector<int> mask;
      for (int i = 0; i < 16; ++i)
        mask.push_back(at + i);
      pieces.push_back(scalef(b, b.CreateShuffleVector(p, mask), b.CreateShuffleVector(n, mask)));
    }
    while (pieces.size() > 1) {  // concatenate neighbours until one vector is left
      std::vector<Value*> joined;
      for (size_t i = 0; i < pieces.size(); i += 2) {
        std::vector<int> mask(2 * lanes_of(pieces[i]->getType()));
        for (size_t k = 0; k < mask.size(); ++k)
          mask[k] = static_cast<int>(k);
        joined.push_back(b.CreateShuffleVector(pieces[i], pieces[i + 1], mask));
      }
      pieces = std::move(joined);
    }
    return pieces[0];
  }
  if (lanes == 16) {
    return b.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_scalef_ps_512, {},
                             {p, n, p, b.getInt16(0xffff), b.getInt32(4)});  // 4: MXCSR rounding
  }
  const ID id = lanes == 8 ? llvm::Intrinsic::x86_avx512_mask_scalef_ps_256
                           : llvm::Intrinsic::x86_avx512_mask_scalef_ps_128;
  return b.CreateIntrinsic(id, {}, {p, n, p, b.getInt8(0xff)});
}

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^9: kLn2Hi has 15 significant bits.
constexpr double kLn2Hi = 0.693145751953125;         // 0x3f317200
constexpr double kLn2Lo = 1.428606765330187045e-06;  // 0x35bfbe8e, ln 2 - kLn2Hi rounded
constexpr double kLog2e = 1.44269504088896340736;

}  // namespace

// exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (Cody-Waite, two
// steps, the first exact). exp(r) = 1 + r + r^2 Q(r), Q of degree 4: 0.06 ulp of fit error.
llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target,
                      ExpArgument argument) {
  Type* ty = x->getType();
  const bool use_scalef = has_scalef(ty, target);
  const bool non_positive = argument == ExpArgument::kNonPositive;
  // Below -104 the result rounds to +0, above 89 to inf; the clamp keeps n in [-150, 128] so the
  // scaling below stays in range. It maps -inf to 0 and +inf to inf. It compares and selects (one
  // vmaxps/vminps each on x86), so a NaN goes through it and every step after it: no select at
  // the end. An argument known to be <= 0 cannot overflow: no upper clamp.
  Value* xc = clamp_keeping_nan(b, x, -104.0, non_positive ? std::nullopt : std::optional(89.0));
  // Adding 1.5 * 2^23 rounds x / ln 2 to an integer (ties to even) and leaves that integer in the
  // low mantissa bits, so n needs no rint intrinsic (a libcall without SSE4.1) and no fptosi.
  // For x <= 0 the integer left there is n + kBias instead (see below); the rounding is the same.
  constexpr int kBias = 100;
  const double magic = 12582912.0 + (non_positive && !use_scalef ? kBias : 0);
  Value* t = mul_add(b, xc, fconst(ty, kLog2e), fconst(ty, magic));
  Value* n = b.CreateFSub(t, fconst(ty, magic));
  Value* r = mul_add(b, n, fconst(ty, -kLn2Hi), xc);
  r = mul_add(b, n, fconst(ty, -kLn2Lo), r);
  Value* q = poly(b, r, {0.49999994, 0.166665211, 0.041668389, 0.00836871658, 0.00138146197});
  // 1 + (r + r^2 Q): the small terms are summed before the 1 so their rounding errors shrink.
  Value* p = b.CreateFAdd(fconst(ty, 1.0), mul_add(b, b.CreateFMul(r, r), q, r));
  if (use_scalef) return scalef(b, p, n);
  Type* ity = int_type(ty);
  if (non_positive) {
    // n is in [-150, 0], so p 2^(n + 100) is a normal float (p is in [0.7, 1.42]): n + 100 added
    // to p's exponent field. t's bits shifted by 23 are exactly (n + 100) << 23, the bits above
    // shifting out. One multiply by 2^-100 then rounds p 2^n once, into the denormals too. Fused
    // with adding x - x: zero, or a NaN for a NaN x, whose exponent field the addition garbled.
    Value* exponent = b.CreateShl(b.CreateBitCast(t, ity), 23);
    Value* scaled = b.CreateBitCast(b.CreateAdd(b.CreateBitCast(p, ity), exponent), ty);
    return mul_add(b, scaled, fconst(ty, std::ldexp(1.0, -kBias)), b.CreateFSub(xc, xc));
  }
  Value* ni = b.CreateSub(b.CreateBitCast(t, ity), iconst(ty, 0x4b400000));
  // 2^n in two factors 2^(n/2): each stays a normal float over n's whole range. p * 2^n1 is exact,
  // so the product rounds once, also when it overflows or lands in the denormals. A NaN in p
  // makes the product NaN whatever the factors' bits.
  Value* n1 = b.CreateAShr(ni, 1);
  Value* n2 = b.CreateSub(ni, n1);
  return b.CreateFMul(b.CreateFMul(p, pow2(b, n1, ty)), pow2(b, n2, ty));
}

// log(x) = k ln 2 + log(1 + f) with 1 + f = x / 2^k in [sqrt(1/2), sqrt(2)). With s = f / (2 + f),
// log(1 + f) = 2 atanh(s) = 2s + s z R(z), z = s^2, and 2s = f - s f, so
// log(1 + f) = f - s (f - z R(z)): f is exact and the rest is small, which keeps the error of s
// (two roundings) out of the leading term. R of degree 2: 0.03 ulp of fit error.
llvm::Value* emit_log(llvm::IRBuilderBase& b, llvm::Value* x) {
  Type* ty = x->getType();
  // Denormals have no implicit leading bit; scaling by 2^23 makes them normal and exact.
  Value* denormal = b.CreateFCmpOLT(x, fconst(ty, 0x1p-126));
  Value* xs = b.CreateSelect(denormal, b.CreateFMul(x, fconst(ty, 0x1p23)), x);
  Value* k_bias = b.CreateSelect(denormal, iconst(ty, -23), iconst(ty, 0));
  // Subtracting the bits of sqrt(1/2) makes the exponent field k directly; the mantissa keeps
  // bits relative to it, so 1 + f lands in [sqrt(1/2), sqrt(2)) without a compare.
  Value* ix = b.CreateBitCast(xs, int_type(ty));
  Value* d = b.CreateSub(ix, iconst(ty, 0x3f3504f3));
  Value* k = b.CreateAdd(b.CreateAShr(d, 23), k_bias);
  Value* m = b.CreateBitCast(b.CreateSub(ix, b.CreateAnd(d, iconst(ty, ~0x7fffff))), ty);
  Value* f = b.CreateFSub(m, fconst(ty, 1.0));  // exact (Sterbenz)
  Value* s = b.CreateFDiv(f, b.CreateFAdd(f, fconst(ty, 2.0)));
  Value* z = b.CreateFMul(s, s);
  Value* rz = poly(b, z, {0.666667759, 0.399775386, 0.298718512});
  Value* t = b.CreateFMul(s, mul_add(b, b.CreateFNeg(z), rz, f));
  // k ln2 + f - t, with the low part of k ln2 folded into the small term first.
  Value* kf = b.CreateSIToFP(k, ty);
  Value* low = b.CreateFSub(f, mul_add(b, kf, fconst(ty, -kLn2Lo), t));
  Value* result = mul_add(b, kf, fconst(ty, kLn2Hi), low);
  Value* inf = fconst(ty, INFINITY);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, inf), inf, result);
  result = b.CreateSelect(b.CreateFCmpOEQ(x, fconst(ty, 0.0)), b.CreateFNeg(inf), result);
  result = b.CreateSelect(b.CreateFCmpOLT(x, fconst(ty, 0.0)), fconst(ty, NAN), result);
  return keep_nan(b, x, result);
}

// tanh(|x|) = |x| + |x|^3 P(x^2) below 0.55 (no cancellation near 0; P of degree 4, 0.1 ulp of
// fit error), else 1 - 2 / (exp(2|x|) + 1). At 0.55 and above the result is >= 0.5 and the
// subtracted term <= 0.5, so the errors of the exp-based term stay within about one ulp.
llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target) {
  Type* ty = x->getType();
  Value* a = unary(b, llvm::Intrinsic::fabs, x);
  Value* z = b.CreateFMul(a, a);
  Value* p = poly(b, z, {-0.333333194, 0.133326009, -0.0538538396, 0.0210776776, -0.00628235284});
  Value* small = mul_add(b, b.CreateFMul(a, z), p, a);
  // For |x| > 44.5 (and inf) exp gives inf and the quotient 0, so large is 1 without a clamp.
  Value* e = emit_exp(b, b.CreateFMul(a, fconst(ty, 2.0)), target);
  Value* large = b.CreateFSub(fconst(ty, 1.0),
                              b.CreateFDiv(fconst(ty, 2.0), b.CreateFAdd(e, fconst(ty, 1.0))));
  Value* result = b.CreateSelect(b.CreateFCmpOLT(a, fconst(ty, 0.55)), small, large);
  return keep_nan(b, x, binary(b, llvm::Intrinsic::copysign, result, x));
}

// erf(|x|) = |x| + |x| P(x^2) below 1 (P of degree 6, 0.2 ulp of fit error), else
// 1 - exp(-x^2) Q(|x| - 1) with Q ~ erfcx of degree 8 fitted on [1, 4] for the absolute error of
// erfc (0.1 ulp). There erfc <= 0.16, so its relative errors (including that of rounding x^2
// before exp) shrink by that factor in the result.
llvm::Value* emit_erf(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target) {
  Type* ty = x->getType();
  Value* a = unary(b, llvm::Intrinsic::fabs, x);
  Value* p = poly(b, b.CreateFMul(a, a),
                  {0.128379166, -0.37612626, 0.112836003, -0.0268544462, 0.00518953707,
                   -0.00080208492, 7.88912221e-05});
  Value* small = mul_add(b, a, p, a);
  // Above 3.92 erf rounds to 1, which Q gives at 4; the clamp keeps Q in its fitted range (far
  // outside it Q overflows, and 0 * inf would be NaN).
  Value* ac = binary(b, llvm::Intrinsic::minnum, a, fconst(ty, 4.0));
  Value* q = poly(b, b.CreateFSub(ac, fconst(ty, 1.0)),
                  {0.427583575, -0.273210734, 0.154343784, -0.0790067315, 0.0367263407,
                   -0.0148659749, 0.00469953287, -0.000965603627, 9.14478587e-05});
  Value* e = emit_exp(b, b.CreateFNeg(b.CreateFMul(ac, ac)), target, ExpArgument::kNonPositive);
  Value* large = mul_add(b, b.CreateFNeg(e), q, fconst(ty, 1.0));
  Value* result = b.CreateSelect(b.CreateFCmpOLT(a, fconst(ty, 1.0)), small, large);
  return keep_nan(b, x, binary(b, llvm::Intrinsic::copysign, result, x));
}

// 1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below: exp only ever sees -|x|, so it
// cannot overflow, and for very negative x the result follows exp(x) into the denormals instead of
// becoming 1 / inf = 0. A NaN needs no select here: exp returns it, and it survives the division.
llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target) {
  Type* ty = x->getType();
  Value* e = emit_exp(b, b.CreateFNeg(unary(b, llvm::Intrinsic::fabs, x)), target,
                      ExpArgument::kNonPositive);
  Value* one = fconst(ty, 1.0);
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, fconst(ty, 0.0)), one, e);
  return b.CreateFDiv(num, b.CreateFAdd(one, e));
}

}  // namespace kiln::codegen
