// Size-generic kernels: sizes, strides and offsets that vary from call to call.
//
// A kernel may serve every value of some run-time integers, its size inputs: what the plan
// computes per call from the region's sizes (a sequence length, a batch, a KV cache's length plus
// one). Each size, stride or offset that varies with them carries a SizeTerm, a constant times a
// product of inputs plus a constant, where a factor may be an input in a form, scale * s + shift
// (an image side floored by strides: s - 1, 8*s + 1): dense strides are products of sizes, and
// collapse_dims' merges multiply sizes, which keeps a term a term but where a term with both a
// factor and a constant would multiply one whose factors it cannot take (collapse_dims then
// leaves them apart). The
// concrete fields (Kernel::sizes, IndexMap::strides and offset) keep their values at
// Kernel::size_inputs, the example binding, so code that reads them sees one member of the
// family, and bind_sizes moves a kernel to another member.
//
//   kernel softmax_0 [s0, s1] reduce 1           (size inputs s0 = 4, s1 = 128)
//     %0 = load b0[s1, 1]
//
// Terms are understood by validate, same_computation, the printer, collapse_dims and bind_sizes
// (the interpreter runs any binding through it). generalize.h makes them (for a region's shape
// class). The LLVM generator compiles them into one function that reads the size inputs at run
// time (backend/codegen/llvm/size_values.h), the CUDA generator into one __global__ function taking
// them as parameters (backend/codegen/cuda/cuda_emitter.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "passes/kernel/kernel.h"

namespace kiln::kernel {

/// The term's value for these size inputs.
int64_t evaluate(const SizeTerm& term, std::span<const int64_t> inputs);

/// `term` if set, else the constant `value`, as a term (a constant has no factors).
SizeTerm term_or_constant(const std::optional<SizeTerm>& term, int64_t value);

/// The form of the term's factor `k`: {1, 0} where the term has no forms.
FactorForm form_of(const SizeTerm& term, size_t k);

/// `term` in canonical order: its factors sorted by input then form, and no forms where every
/// factor is its input itself.
SizeTerm normalized(SizeTerm term);

/// a * b, normalized: factors sorted, none left beside a zero coefficient. A factor with a
/// constant, c * s + d, multiplies as g * ((c/g) * s + d/g), g = gcd(c, d), so (s - 1) * t is
/// the term (s-1)*t; none where a term with a constant has other factors too.
std::optional<SizeTerm> product(const SizeTerm& a, const SizeTerm& b);

/// `term` as a kernel field: none when it is a constant.
std::optional<SizeTerm> as_field(const SizeTerm& term);

/// The size of dim `d` (a term or a constant), and the stride of `map` along it.
SizeTerm size_term(const Kernel& kernel, int d);
SizeTerm stride_term(const IndexMap& map, int d);

/// Whether any size, stride or offset of the kernel carries a term.
bool is_size_generic(const Kernel& kernel);

/// The kernel at other size inputs: each size, stride and offset with a term takes its value
/// there, and `inputs` becomes the example binding. Throws std::invalid_argument when `inputs`
/// has not one value per size input.
Kernel bind_sizes(const Kernel& kernel, std::span<const int64_t> inputs);

/// The kernel at its example binding as a kernel of constant sizes (its terms dropped): what
/// the lowering makes at those sizes.
Kernel without_terms(Kernel kernel);

/// Empty when the kernel's terms are well formed (one per dim or none, factors naming size
/// inputs in order, forms canonical, each concrete field equal to its term at the example binding);
/// otherwise what is wrong. validate() calls it.
std::string size_term_problem(const Kernel& kernel);

/// Why a code generator cannot compile `kernel` size-generic, or empty (also for a kernel of
/// constant sizes). Its example binding must have every size input at least 2, as dynamo's
/// symbols are, and no stride term 0 or 1 there: so the decisions that compare a stride or a size
/// with 0 or 1 (broadcasts, contiguous vectors) come out as they would at every binding. A split
/// reduction (split_pieces) has no size-generic code.
std::string generic_problem(const Kernel& kernel);

/// "768*s0*s1", "s0", "-2*s1", "s0+1", "4", "8*(s0-1)*(2*s1+1)".
std::string print_term(const SizeTerm& term);

}  // namespace kiln::kernel
