// What the LLVM kernel emitters share (kernel_emitter.cpp: elementwise kernels and reductions
// along rows; across_rows_emitter.cpp: reductions across rows): the function and its buffers,
// counted loops, the offsets of every index map at a row, row values, and how a reduction starts,
// combines two values and finishes.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <memory>
#include <vector>

#include "backend/codegen/llvm/size_values.h"
#include "backend/codegen/llvm/value_emitter.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

class EmitterCore {
 public:
  EmitterCore(llvm::Module& module, const kernel::Kernel& kernel, int vector_bits, MathTarget math);
  virtual ~EmitterCore() = default;

  /// Creates  void name(void* const* buffers, const i64* sizes, i64 begin, i64 end)  and emits
  /// its body.
  llvm::Function* emit();

 protected:
  using Offsets = std::vector<llvm::Value*>;

  virtual void emit_body() = 0;

  llvm::Value* i64(int64_t v) { return b_.getInt64(v); }
  /// The function's launch range part [begin, end).
  llvm::Value* begin() const { return fn_->getArg(2); }
  llvm::Value* end() const { return fn_->getArg(3); }
  /// A counted loop: runs body(i) for i = start, start+step, ... while i + step <= end, and
  /// returns the first i it did not run.
  llvm::Value* loop(llvm::Value* start, llvm::Value* end, int64_t step,
                    const std::function<void(llvm::Value*)>& body);
  /// Offsets of every map at the start of `row` (a flat index over the first `dims` dims).
  Offsets row_offsets(llvm::Value* row, int dims);
  /// Walks the function's [begin, end), a range of flat indices over dims 0..dim, in runs along
  /// `dim` (runs may be partial at both ends): body(first, stop, offsets) per run, with the
  /// offsets of every map at index 0 of `dim` in that run.
  void walk_runs(int dim,
                 const std::function<void(llvm::Value*, llvm::Value*, const Offsets&)>& body);
  /// Every map's offset moved by i along `dim`.
  Offsets moved(const Offsets& offsets, int dim, llvm::Value* i);
  /// Computes, in order, every row-level expr whose operands are ready.
  void compute_row_values(const Position& at_row);

  llvm::Value* identity(kernel::ReduceKind kind, kernel::DType t, int width);
  llvm::Value* combine(kernel::ReduceKind kind, kernel::DType t, llvm::Value* acc, llvm::Value* v);
  /// Mean's division, and a 16-bit float sum's rounding to its format.
  llvm::Value* finish_reduction(const kernel::Expr& e, llvm::Value* result);

  llvm::Module& module_;
  const kernel::Kernel& kernel_;
  llvm::IRBuilder<> b_;
  int vector_bits_;
  MathTarget math_;
  int width_ = 1;  // lanes of the dtype-independent vector (vector_bits / 32)
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::unique_ptr<ValueEmitter> values_;
  std::unique_ptr<SizeValues> sizes_;  // every extent the code reads, constant or at this call
  std::vector<bool> element_;
  size_t num_maps_ = 0;
};

}  // namespace kiln::codegen
