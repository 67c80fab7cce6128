// The sizes, strides and offsets of a kernel as LLVM values: constants where the kernel has
// them, and for a size-generic kernel (passes/kernel/size_terms.h) the values its terms take at
// this call, computed from the size inputs the function is passed. Emitters ask here for every
// extent they put in the code, so one function serves every binding of its size inputs.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <vector>

#include "passes/kernel/kernel.h"

namespace kiln::codegen {

class SizeValues {
 public:
  /// `inputs`: the size inputs, loaded once in the function's entry block (one per
  /// Kernel::size_inputs; empty for a kernel of constant sizes).
  SizeValues(llvm::IRBuilder<>& builder, const kernel::Kernel& kernel,
             std::vector<llvm::Value*> inputs)
      : b_(builder), kernel_(kernel), inputs_(std::move(inputs)) {}

  /// A term's value: its coefficient times its factors, emitted where the builder stands.
  llvm::Value* term(const kernel::SizeTerm& term);
  llvm::Value* size(int dim);
  llvm::Value* stride(const kernel::IndexMap& map, int dim);
  llvm::Value* offset(const kernel::IndexMap& map);
  /// The product of the reduced dims' sizes (Kernel::row_size).
  llvm::Value* row_size();

  /// Whether the value is the same at every binding (a constant in the code).
  bool constant_size(int dim) const;
  bool constant_row_size() const;

 private:
  llvm::IRBuilder<>& b_;
  const kernel::Kernel& kernel_;
  std::vector<llvm::Value*> inputs_;
};

}  // namespace kiln::codegen
