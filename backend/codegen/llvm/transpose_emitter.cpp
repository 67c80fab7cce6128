#include "backend/codegen/llvm/transpose_emitter.h"

#include "backend/codegen/llvm/emitter_core.h"
#include "backend/codegen/llvm/schedule.h"

namespace kiln::codegen {

namespace {

class TransposeEmitter final : public EmitterCore {
 public:
  using EmitterCore::EmitterCore;

 private:
  void emit_body() override {
    const int rank = kernel_.rank();
    inner_ = rank - 1;
    next_ = rank - 2;
    transposed_ = transposed_loads(kernel_);
    llvm::Value* rows = sizes_->size(next_);
    llvm::Value* columns = sizes_->size(inner_);
    llvm::Value* tiles = b_.CreateUDiv(b_.CreateAdd(rows, i64(kTransposeTileRows - 1)),
                                       i64(kTransposeTileRows));  // folded for constant sizes
    // Each piece of the launch range: one tile of rows, under its index over the outer dims.
    loop(begin(), end(), 1, [&](llvm::Value* piece) {
      llvm::Value* outer = b_.CreateUDiv(piece, tiles);
      llvm::Value* first_row = b_.CreateMul(b_.CreateURem(piece, tiles), i64(kTransposeTileRows));
      const Offsets tile = moved(row_offsets(outer, next_), next_, first_row);
      llvm::Value* left = b_.CreateSub(rows, first_row);
      llvm::BasicBlock* whole = llvm::BasicBlock::Create(b_.getContext(), "whole_tile", fn_);
      llvm::BasicBlock* partial = llvm::BasicBlock::Create(b_.getContext(), "partial_tile", fn_);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(b_.getContext(), "tile_done", fn_);
      b_.CreateCondBr(b_.CreateICmpSGE(left, i64(kTransposeTileRows)), whole, partial);
      b_.SetInsertPoint(whole);
      for (int64_t block = 0; block < kTransposeTileRows; block += width_) {
        const Offsets at = moved(tile, next_, i64(block));
        llvm::Value* tail =
            loop(i64(0), columns, width_, [&](llvm::Value* column) { block_of(at, column); });
        for (int r = 0; r < width_; ++r)
          elements(moved(at, next_, i64(r)), tail, columns);
      }
      b_.CreateBr(done);
      b_.SetInsertPoint(partial);
      loop(i64(0), left, 1,
           [&](llvm::Value* r) { elements(moved(tile, next_, r), i64(0), columns); });
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    });
  }

  /// The width_ x width_ block at rows [0, width_) from `at` and columns [column, + width_).
  void block_of(const Offsets& at, llvm::Value* column) {
    // Each transposed load: width_ vectors along the rows (one per column), turned into one
    // vector along the columns per row.
    std::vector<std::vector<llvm::Value*>> by_row;
    for (int id : transposed_) {
      std::vector<llvm::Value*> by_column;
      for (int c = 0; c < width_; ++c) {
        const Offsets at_column = moved(at, inner_, b_.CreateAdd(column, i64(c)));
        values_->forget_elements();
        by_column.push_back(values_->value(id, Position{width_, i64(0), &at_column, next_}));
      }
      by_row.push_back(transpose(std::move(by_column)));
    }
    for (int r = 0; r < width_; ++r) {
      const Offsets row = moved(at, next_, i64(r));
      values_->forget_elements();
      for (size_t t = 0; t < transposed_.size(); ++t)
        values_->set_element(transposed_[t], by_row[t][r]);
      store_all(Position{width_, column, &row});
    }
    values_->forget_elements();
  }

  /// One row's columns [first, end) as kernel_emitter.h walks them: vectors (the transposed
  /// loads gather their lanes), then single elements.
  void elements(const Offsets& row, llvm::Value* first, llvm::Value* end) {
    llvm::Value* next = loop(first, end, width_, [&](llvm::Value* column) {
      values_->forget_elements();
      store_all(Position{width_, column, &row});
    });
    loop(next, end, 1, [&](llvm::Value* column) {
      values_->forget_elements();
      store_all(Position{1, column, &row});
    });
    values_->forget_elements();
  }

  /// Every store at `at`: its values first, since an output written in place of an input must
  /// not be stored before a later store's value has loaded that input (kernel_emitter.cpp).
  void store_all(const Position& at) {
    for (const kernel::Store& store : kernel_.stores)
      values_->value(store.value, at);
    for (size_t s = 0; s < kernel_.stores.size(); ++s)
      values_->store(static_cast<int>(s), at);
  }

  /// v[k] lane l -> result[l] lane k, by swapping the off-diagonal halves of ever smaller blocks.
  std::vector<llvm::Value*> transpose(std::vector<llvm::Value*> v) {
    const int w = static_cast<int>(v.size());
    for (int half = w / 2; half >= 1; half /= 2) {
      std::vector<int> low(w), high(w);
      for (int l = 0; l < w; ++l) {
        low[l] = (l & half) ? w + l - half : l;
        high[l] = (l & half) ? w + l : l + half;
      }
      for (int k = 0; k < w; ++k) {
        if (k & half) continue;
        llvm::Value* a = v[k];
        llvm::Value* c = v[k + half];
        v[k] = b_.CreateShuffleVector(a, c, low);
        v[k + half] = b_.CreateShuffleVector(a, c, high);
      }
    }
    return v;
  }

  int inner_ = 0, next_ = 0;
  std::vector<int> transposed_;  // the loads read along the rows
};

}  // namespace

llvm::Function* emit_transpose_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                                      int vector_bits, MathTarget math) {
  return TransposeEmitter(module, kernel, vector_bits, math).emit();
}

}  // namespace kiln::codegen
