// Error bounds of the fuzzer (see the tolerance rules in fuzz_case.h): each value carries its
// eager result and a float64 bound per element, propagated op by op.
#pragma once

#include <ATen/Tensor.h>

#include <string>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln::fuzz {

// Whether kiln's code generator lets LLVM fuse a multiply and an add into one FMA. It does not
// (a value recomputed in two passes over a row must round alike); the bounds below still know
// how to allow for it.
constexpr bool kKilnContractsFma = false;

struct Val {
  ir::Value* value = nullptr;  // null for a tensor made for a proposal not yet kept
  at::Tensor eager;
  at::Tensor v64;    // eager in float64
  at::Tensor bound;  // float64 error bound of each element
  bool exact = true;
  /// A float rounded from a multiply that kiln would feed unrounded into a following add or
  /// subtract if it let LLVM contract the two into one FMA (it does not: kKilnContractsFma).
  bool product = false;
  bool leaf = false;  // a graph input or a constant
  int uses = 0;
};

/// `t` as contiguous float64.
at::Tensor as64(const at::Tensor& t);
/// A graph input or constant: exact.
Val leaf_val(const at::Tensor& t);

/// True when kiln's last step for `op` is a multiply (one LLVM could contract with a following
/// add or subtract, were contraction on).
bool ends_in_product(const std::string& op, const ir::AttrList& attrs,
                     const std::vector<const Val*>& ins);
/// True when kiln and eager round `op` identically (the result must match exactly).
bool exact_op(const std::string& op, at::ScalarType out, const ir::AttrList& attrs,
              const std::vector<const Val*>& ins);
/// The bound of each element of `r`, the eager result of `op` on `ins` (0: exact; inf: not
/// checked).
at::Tensor error_bound(const std::string& op, const ir::AttrList& attrs,
                       const std::vector<const Val*>& ins, const at::Tensor& r, at::ScalarType out);

}  // namespace kiln::fuzz
