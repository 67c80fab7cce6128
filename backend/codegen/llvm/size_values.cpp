#include "backend/codegen/llvm/size_values.h"

#include "passes/kernel/size_terms.h"

namespace kiln::codegen {

llvm::Value* SizeValues::term(const kernel::SizeTerm& term) {
  llvm::Value* value = nullptr;
  for (size_t k = 0; k < term.factors.size(); ++k) {
    llvm::Value* factor = inputs_.at(term.factors[k]);
    const kernel::FactorForm form = kernel::form_of(term, k);
    if (form.scale != 1) factor = b_.CreateMul(factor, b_.getInt64(form.scale));
    if (form.shift != 0) factor = b_.CreateAdd(factor, b_.getInt64(form.shift));
    value = value ? b_.CreateMul(value, factor) : factor;
  }
  if (!value) return b_.getInt64(term.coefficient + term.constant);
  if (term.coefficient != 1) value = b_.CreateMul(value, b_.getInt64(term.coefficient));
  return term.constant == 0 ? value : b_.CreateAdd(value, b_.getInt64(term.constant));
}

llvm::Value* SizeValues::size(int dim) {
  return term(kernel::size_term(kernel_, dim));
}

llvm::Value* SizeValues::stride(const kernel::IndexMap& map, int dim) {
  return term(kernel::stride_term(map, dim));
}

llvm::Value* SizeValues::offset(const kernel::IndexMap& map) {
  return term(kernel::term_or_constant(map.offset_term, map.offset));
}

llvm::Value* SizeValues::row_size() {
  llvm::Value* n = b_.getInt64(1);
  for (int d = kernel_.row_rank(); d < kernel_.rank(); ++d)
    n = b_.CreateMul(n, size(d));  // folded where the sizes are constants
  return n;
}

bool SizeValues::constant_size(int dim) const {
  return kernel_.size_terms.empty() || !kernel_.size_terms[dim];
}

bool SizeValues::constant_row_size() const {
  for (int d = kernel_.row_rank(); d < kernel_.rank(); ++d)
    if (!constant_size(d)) return false;
  return true;
}

}  // namespace kiln::codegen
