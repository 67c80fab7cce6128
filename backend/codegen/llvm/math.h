#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

// Each emits IR that computes the function elementwise on `x`, a `float` or `<N x float>` value,
// and returns a value of the same type. The code has no calls and no branches (selects only), so
// LLVM's loop vectorizer can vectorize a loop that uses it. The only intrinsics are fmuladd, fabs,
// copysign and minnum, which lower to instructions (checked on x86-64, with and without
// FMA; fmuladd fuses only where the target has FMA, and the error bounds below hold either way).
//
// With `MathTarget::avx512` (AVX-512F and VL on the CPU kiln runs on), exp and the functions
// built on it scale by 2^n with one vscalefps per vector (x86 intrinsics) instead of building two
// powers of two in integer lanes and multiplying twice: about 10 fewer instructions per vector,
// and the same result bit for bit (both round p * 2^n once; math_test compares all 2^32 inputs).
// Scalars, and vectors whose lanes are not 4, 8 or a multiple of 16, take the generic form.
struct MathTarget {
  bool avx512 = false;
};

/// What a caller knows of exp's argument. kNonPositive: x <= 0 or NaN (softmax's x - max(x),
/// sigmoid's -|x|, erf's -x^2), so the clamp at the overflow end is left out and, without
/// AVX-512, 2^n is one exponent-field addition and one multiply instead of two powers of two
/// built in integer lanes and two multiplies (about 6 fewer instructions a vector); no result
/// changes (math_test compares both forms on every non-positive float).
enum class ExpArgument { kAny, kNonPositive };

llvm::Value* emit_exp(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target = {},
                      ExpArgument argument = ExpArgument::kAny);
llvm::Value* emit_log(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target = {});
llvm::Value* emit_erf(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target = {});
llvm::Value* emit_sigmoid(llvm::IRBuilderBase& b, llvm::Value* x, MathTarget target = {});

/// The maximum error of each function, in float32 ulp against the C library's double result
/// rounded to float, that tests/codegen/math_test.cpp asserts. They are the maxima measured over
/// all 2^32 inputs (vector form, x86-64 with and without fused multiply-add); the test samples
/// about 6.5 million inputs per function. Erf reaches 2 only without FMA (just below |x| = 1);
/// sigmoid near x = -1.1, where the result lies just below 1/4 and exp(x) in the binade above, so
/// one ulp of exp(x) is two of the result.
inline constexpr double kMaxUlpExp = 1, kMaxUlpLog = 1, kMaxUlpTanh = 1, kMaxUlpErf = 2,
                        kMaxUlpSigmoid = 2;

}  // namespace kiln::codegen
