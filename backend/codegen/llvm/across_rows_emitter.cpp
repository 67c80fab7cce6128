#include "backend/codegen/llvm/across_rows_emitter.h"

#include <algorithm>

#include "backend/codegen/llvm/emitter_core.h"
#include "backend/codegen/llvm/moments.h"

namespace kiln::codegen {

using kernel::DType;
using kernel::Op;
using kernel::ReduceKind;

namespace {

class AcrossRowsEmitter final : public EmitterCore {
 public:
  AcrossRowsEmitter(llvm::Module& module, const kernel::Kernel& kernel, int vector_bits,
                    MathTarget math, int64_t sum_chunk)
      : EmitterCore(module, kernel, vector_bits, math), sum_chunk_(sum_chunk) {}

 private:
  const int64_t sum_chunk_;

  void emit_body() override { emit_reducing_across_rows(); }

  // Reducing across rows (schedule.h): [begin, end) is a range of rows, walked by runs of the
  // last row dim as emit_elementwise walks its innermost dim. Each block of rows is one vector
  // position along that dim; the reduced dims are walked one element at a time. Blocks are
  // kAcrossRowsUnroll vectors wide (LLVM splits the wide type into independent registers, so
  // sums have that many chains), then one vector, then a half and a quarter vector, then single
  // rows. The narrower vectors matter: each leftover row walks every reduced element on its own,
  // scalar, and leftovers are common (40, 24 or 144 channels, or 72 rows a thread).
  void emit_reducing_across_rows() {
    constexpr int kAcrossRowsUnroll = 4;
    const int last_row = kernel_.row_rank() - 1;
    std::vector<int> widths = {width_ * kAcrossRowsUnroll, width_};
    for (int narrower = width_ / 2; narrower >= 4; narrower /= 2)
      widths.push_back(narrower);
    widths.push_back(1);
    walk_runs(last_row, [&](llvm::Value* first, llvm::Value* stop, const Offsets& offsets) {
      llvm::Value* next = first;
      for (int width : widths) {
        next = loop(next, stop, width, [&](llvm::Value* j) {
          emit_row_block(Position{width, j, &offsets, last_row});
        });
      }
    });
  }

  /// One block of rows (at_row.width of them): its reductions, its row values, its stores.
  void emit_row_block(const Position& at_row) {
    values_->forget_rows();
    values_->forget_elements();
    compute_row_values(at_row);
    // Reductions that do not read each other's results walk the reduced dims together.
    const std::vector<RowPass> passes = row_passes(kernel_, width_, /*one_pass=*/false);
    const std::vector<bool> early =
        passes.size() == 1 ? stores_without_reductions() : std::vector<bool>(kernel_.stores.size());
    for (const RowPass& pass : passes) {
      const std::vector<llvm::Value*> results = reduce_across_rows(pass.reductions, at_row, early);
      for (size_t r = 0; r < results.size(); ++r)
        values_->set_row_value(pass.reductions[r], results[r]);
      compute_row_values(at_row);
    }
    for (size_t s = 0; s < kernel_.stores.size(); ++s) {
      if (kernel::stores_per_element(kernel_, kernel_.stores[s])) continue;
      values_->store(static_cast<int>(s), at_row);
    }
    if (std::find(early.begin(), early.end(), false) == early.end()) return;
    walk_reduced_dims(*at_row.offsets, kernel_.row_rank(), [&](const Offsets& at) {
      const Position element{at_row.width, at_row.index, &at, at_row.dim};
      for (size_t s = 0; s < kernel_.stores.size(); ++s)
        if (!early[s] && kernel::stores_per_element(kernel_, kernel_.stores[s]))
          values_->store(static_cast<int>(s), element);
    });
  }

  /// The per-element stores of values that read no reduction (the activation before a squeeze-
  /// excitation's mean): made in the reduction's own walk, while the element value is in a
  /// register, instead of a second walk that loads the inputs and computes it again. Not when an
  /// output may share an input's memory: a later walk would read the stored value.
  std::vector<bool> stores_without_reductions() const {
    std::vector<bool> early(kernel_.stores.size(), false);
    if (!kernel_.in_place.empty()) return early;
    std::vector<bool> reads_reduction(kernel_.exprs.size(), false);
    for (size_t id = 0; id < kernel_.exprs.size(); ++id) {
      const kernel::Expr& e = kernel_.exprs[id];
      reads_reduction[id] = e.op == Op::Reduce;
      for (int arg : e.args)
        reads_reduction[id] = reads_reduction[id] || reads_reduction[arg];
    }
    for (size_t s = 0; s < kernel_.stores.size(); ++s) {
      const kernel::Store& store = kernel_.stores[s];
      early[s] = kernel::stores_per_element(kernel_, store) && !reads_reduction[store.value];
    }
    return early;
  }

  /// Runs body(offsets) at every element of dims [dim, end_dim), one at a time, with the offsets
  /// of every map moved there (end_dim -1: the last dim included).
  void walk_reduced_dims(const Offsets& offsets, int dim,
                         const std::function<void(const Offsets&)>& body, int end_dim = -1) {
    if (end_dim < 0) end_dim = kernel_.rank();
    if (dim == end_dim) {
      values_->forget_elements();
      body(offsets);
      values_->forget_elements();
      return;
    }
    loop(i64(0), sizes_->size(dim), 1, [&](llvm::Value* i) {
      walk_reduced_dims(moved(offsets, dim, i), dim + 1, body, end_dim);
    });
  }

  /// Reductions (`ids`, none reading another's result) with one lane per row: each accumulator
  /// is a vector across the block's rows, so nothing is folded horizontally; the element values
  /// they share are computed once. Float max/min OR a per-lane "saw NaN" mask.
  /// `early`: per store, whether to make it here, at each element (stores_without_reductions).
  std::vector<llvm::Value*> reduce_across_rows(const std::vector<int>& ids, const Position& at_row,
                                               const std::vector<bool>& early) {
    struct Accumulator {
      const kernel::Expr* e;
      bool track_nan;
      llvm::AllocaInst* acc;
      llvm::AllocaInst* nan;
      llvm::AllocaInst* partial;
    };
    const int width = at_row.width;
    llvm::IRBuilder<> entry(entry_, entry_->begin());
    auto get = [&](llvm::AllocaInst* a) { return b_.CreateLoad(a->getAllocatedType(), a); };
    std::vector<Accumulator> accs;
    bool chunked = false;
    for (int id : ids) {
      const kernel::Expr& e = kernel_.exprs[id];
      const DType t = e.dtype;
      Accumulator a{
          &e, ir::is_floating(t) && (e.reduce == ReduceKind::Max || e.reduce == ReduceKind::Min),
          entry.CreateAlloca(values_->register_type(t, width)),
          entry.CreateAlloca(values_->register_type(DType::Bool, width)),
          entry.CreateAlloca(values_->register_type(t, width))};
      b_.CreateStore(identity(e.reduce, t, width), a.acc);
      b_.CreateStore(llvm::Constant::getNullValue(a.nan->getAllocatedType()), a.nan);
      chunked = chunked || (ir::is_floating(t) &&
                            (e.reduce == ReduceKind::Sum || e.reduce == ReduceKind::Mean));
      accs.push_back(a);
    }
    auto add = [&](bool into_partial, const Offsets& at) {
      const Position element{width, at_row.index, &at, at_row.dim};
      for (const Accumulator& a : accs) {
        llvm::AllocaInst* into = into_partial ? a.partial : a.acc;
        llvm::Value* v = values_->value(a.e->args[0], element);
        b_.CreateStore(combine(a.e->reduce, a.e->dtype, get(into), v), into);
        if (a.track_nan) b_.CreateStore(b_.CreateOr(get(a.nan), b_.CreateFCmpUNO(v, v)), a.nan);
      }
      for (size_t s = 0; s < early.size(); ++s)
        if (early[s]) values_->store(static_cast<int>(s), element);
    };
    // Each lane adds its row's elements one after another, so a float sum adds them in chunks
    // where the schedule says so (cpu_schedule.h: kAcrossRowsSumChunk). (A max or min, or an
    // integer sum, computed beside one is the same whatever the grouping.)
    const int64_t chunk = sum_chunk_;
    const int last = kernel_.rank() - 1;
    walk_reduced_dims(
        *at_row.offsets, kernel_.row_rank(),
        [&](const Offsets& outer) {
          llvm::Value* next = i64(0);
          if (chunked && chunk > 0) {
            next = loop(i64(0), sizes_->size(last), chunk, [&](llvm::Value* c) {
              for (const Accumulator& a : accs)
                b_.CreateStore(identity(a.e->reduce, a.e->dtype, width), a.partial);
              loop(i64(0), i64(chunk), 1, [&](llvm::Value* i) {
                values_->forget_elements();
                add(/*into_partial=*/true, moved(outer, last, b_.CreateAdd(c, i)));
              });
              values_->forget_elements();
              for (const Accumulator& a : accs)
                b_.CreateStore(combine(a.e->reduce, a.e->dtype, get(a.acc), get(a.partial)), a.acc);
            });
          }
          loop(next, sizes_->size(last), 1, [&](llvm::Value* i) {
            values_->forget_elements();
            add(/*into_partial=*/false, moved(outer, last, i));
          });
          values_->forget_elements();
        },
        last);
    std::vector<llvm::Value*> results;
    for (const Accumulator& a : accs) {
      llvm::Value* result = get(a.acc);
      if (a.track_nan)
        result = b_.CreateSelect(get(a.nan), llvm::ConstantFP::getNaN(result->getType()), result);
      results.push_back(finish_reduction(*a.e, result));
    }
    return results;
  }
};

}  // namespace

llvm::Function* emit_across_rows_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                                        int vector_bits, MathTarget math, int64_t sum_chunk) {
  return AcrossRowsEmitter(module, kernel, vector_bits, math, sum_chunk).emit();
}

}  // namespace kiln::codegen
