// One size-generic kernel from the same kernel lowered at several bindings of the size inputs.
//
// The lowering is a function of the sizes it sees, so the kernels a fusion group lowers to at
// different sizes differ only in their integers when nothing size-dependent changed its
// structure. Each integer that differs (a size, a stride, an offset, an integral constant: a
// length used as a value) is then a function of the
// size inputs; where it is a monomial, a constant times a product of powers of the inputs (as
// sizes, dense strides and the products collapse_dims makes are), one input times a constant
// plus a constant (a KV cache's P + 1), or a constant times a product of inputs each scaled and
// shifted (an image's area past strides that floor its sides), that is its term (size_terms.h).
// Everything else must be equal: op for op, other constants bit for bit, buffer for buffer. So the
// passes and the lowering need not know about symbols: lowering a group at a base binding and once
// more per size input, each time that input alone moved, is enough to find every term, and a
// binding the fit did not use checks it.
//
//   bindings {8, 64}, {9, 64}, {8, 65}     (the base, then s0 moved, then s1 moved)
//   sizes    [8, 64], [9, 64], [8, 65]     -> [s0, s1]
//   a stride 64, 64, 65                    -> s1
//   an offset 512, 576, 520                -> s0*s1
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// Size inputs per lowering: bindings[0] is the base, and bindings[1 + i] differs from it in
/// input i alone (each input moved once, to another value of at least 2). One more binding may
/// follow, a check (any binding of values at least 2): every term must give its value too. Two
/// points along an input fit an affine term and a product of shifted factors alike (64 (8s+1)^2
/// at s = 7 and 8 is also 62464 s - 229312); the check chooses.
using Bindings = std::vector<std::vector<int64_t>>;

/// `bindings` with `check` after them.
Bindings with_check(Bindings bindings, std::span<const int64_t> check);

/// The monomial term that takes `values[j]` at `bindings[j]` for every j (a constant has no
/// factors), or nullopt: an integer that no monomial of degree up to 4 per input gives.
std::optional<SizeTerm> fit_monomial(std::span<const int64_t> values, const Bindings& bindings);

/// fit_monomial's term, else one input times a constant plus a constant (a KV cache's length
/// plus one, times constant sizes), else a constant times a product of inputs each scaled by a
/// power of two up to 64 and shifted (an image's area past an unpadded stride-2 pool:
/// c*(s0-1)*(s1-1)), else nullopt (a sum of two inputs, a fraction).
std::optional<SizeTerm> fit_term(std::span<const int64_t> values, const Bindings& bindings);

/// Why no term fits: "<what> takes 9, 10, 12 at the bindings: ...", for generalize's and
/// generalize_graph's reasons.
std::string no_term_reason(const std::string& what, std::span<const int64_t> values);

/// What generalize makes of the kernels: the generic kernel (bound at the base binding, its
/// concrete fields those of kernels[0]), or why there is none.
struct Generalized {
  std::optional<Kernel> kernel;
  std::string why_not;
};

/// `kernels[j]` is one kernel lowered at `bindings[j]`. Returns the kernel whose terms give each
/// of them at its binding; none when they differ in anything but integers, or when an integer
/// fits no term. Throws std::invalid_argument when the bindings are not laid out as Bindings
/// says or there is not one kernel per binding.
Generalized generalize(const std::vector<Kernel>& kernels, const Bindings& bindings);

}  // namespace kiln::kernel
