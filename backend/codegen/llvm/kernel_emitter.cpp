#include "backend/codegen/llvm/kernel_emitter.h"

#include <algorithm>
#include <utility>

#include "backend/codegen/llvm/across_rows_emitter.h"
#include "backend/codegen/llvm/cpu_schedule.h"
#include "backend/codegen/llvm/emitter_core.h"
#include "backend/codegen/llvm/moments.h"
#include "backend/codegen/llvm/transpose_emitter.h"
#include "kiln/error.h"

namespace kiln::codegen {

using kernel::DType;
using kernel::Op;
using kernel::ReduceKind;

namespace {

/// Elementwise kernels, and reducing kernels vectorized along their rows.
class KernelEmitter final : public EmitterCore {
 public:
  KernelEmitter(llvm::Module& module, const kernel::Kernel& kernel, const CpuSchedule& schedule,
                MathTarget math)
      : EmitterCore(module, kernel, schedule.vector_bits, math), schedule_(schedule) {}

 private:
  void emit_body() override {
    if (kernel_.reduce_rank == 0) {
      emit_elementwise();
    } else {
      emit_reducing();
    }
  }

  /// The body of a loop: where it stands, and which accumulator it feeds (0..unroll-1 for the
  /// vector steps, -1 for the scalar tail).
  using Body = std::function<void(const Position&, int accumulator)>;

  /// Walks the innermost dimension over [start, end): `unroll` vectors per step (independent
  /// accumulators, so a reduction is not one long dependency chain), then single vectors, then
  /// scalar steps.
  void inner_loop(llvm::Value* start, llvm::Value* end, const std::vector<llvm::Value*>& offsets,
                  const Body& body, int unroll, bool vectors = true) {
    llvm::Value* next = start;
    if (vectors && width_ > 1 && unroll > 1) {
      next = loop(next, end, static_cast<int64_t>(width_) * unroll, [&](llvm::Value* i) {
        for (int k = 0; k < unroll; ++k) {
          values_->forget_elements();
          body(Position{width_, b_.CreateAdd(i, i64(static_cast<int64_t>(k) * width_)), &offsets},
               k);
        }
      });
    }
    if (vectors && width_ > 1) {
      next = loop(next, end, width_, [&](llvm::Value* i) {
        values_->forget_elements();
        body(Position{width_, i, &offsets}, 0);
      });
    }
    loop(next, end, 1, [&](llvm::Value* i) {
      values_->forget_elements();
      body(Position{1, i, &offsets}, -1);
    });
    values_->forget_elements();
  }

  /// Whether row_loops walks this kernel's innermost dim in chunks (when given an end_chunk).
  bool chunks_rows() const { return schedule_.sum_chunk > 0; }

  /// Walks every element of a row: nested loops over the reduced dims, the last one vectorized.
  /// With `end_chunk`, an innermost dim the schedule chunks is walked in chunks of
  /// schedule_.sum_chunk, and `end_chunk` emitted after each.
  void row_loops(const std::vector<llvm::Value*>& offsets, int dim, const Body& body, int unroll,
                 const std::function<void()>& end_chunk = {}) {
    const int last = kernel_.rank() - 1;
    if (dim == last) {
      llvm::Value* size = sizes_->size(last);
      if (!end_chunk || !chunks_rows()) {
        inner_loop(i64(0), size, offsets, body, unroll);
        return;
      }
      const int64_t chunk_size = schedule_.sum_chunk;
      llvm::Value* whole_chunks = b_.CreateUDiv(size, i64(chunk_size));
      loop(i64(0), whole_chunks, 1, [&](llvm::Value* chunk) {
        llvm::Value* begin = b_.CreateMul(chunk, i64(chunk_size));
        inner_loop(begin, b_.CreateAdd(begin, i64(chunk_size)), offsets, body, unroll);
        end_chunk();
      });
      // The last, partial chunk (at run time it may be empty: ending it then adds nothing).
      if (!sizes_->constant_size(last) || kernel_.sizes[last] % chunk_size != 0) {
        inner_loop(b_.CreateMul(whole_chunks, i64(chunk_size)), size, offsets, body, unroll);
        end_chunk();
      }
      return;
    }
    loop(i64(0), sizes_->size(dim), 1, [&](llvm::Value* i) {
      row_loops(moved(offsets, dim, i), dim + 1, body, unroll, end_chunk);
    });
  }

  // Elementwise: [begin, end) is a range of flat element indices; walk it row by row of the
  // innermost dimension (rows may be partial at both ends).
  void emit_elementwise() {
    auto store_all = [&](const Position& at, int) {
      // Every value first, then the stores: values are emitted when a store first asks for them,
      // and an output written in place of an input (kernel.in_place) must not be stored before
      // a later store's value has loaded that input.
      for (const kernel::Store& store : kernel_.stores)
        values_->value(store.value, at);
      for (size_t s = 0; s < kernel_.stores.size(); ++s)
        values_->store(static_cast<int>(s), at);
    };
    walk_runs(kernel_.rank() - 1,
              [&](llvm::Value* first, llvm::Value* stop, const Offsets& offsets) {
                if (schedule_.streaming_stores) {
                  // Scalar steps up to the first 64-byte aligned output element, then aligned
                  // streaming vector stores (no read-for-ownership of output lines nobody will read
                  // soon).
                  llvm::Value* aligned = first_aligned_index(first, stop, offsets);
                  inner_loop(first, aligned, offsets, store_all, 1, /*vectors=*/false);
                  values_->set_streaming_stores(true);
                  inner_loop(aligned, stop, offsets, store_all, 1);
                  values_->set_streaming_stores(false);
                } else {
                  inner_loop(first, stop, offsets, store_all, 1);
                }
              });
  }

  /// The first index in [first, stop] whose output element starts a 64-byte line.
  llvm::Value* first_aligned_index(llvm::Value* first, llvm::Value* stop,
                                   const std::vector<llvm::Value*>& offsets) {
    const kernel::Store& store = kernel_.stores[0];
    const int64_t size = ir::dtype_size(kernel_.buffers[store.map.buffer].dtype);
    const int map = static_cast<int>(kernel_.exprs.size());
    llvm::Value* element = b_.CreateAdd(offsets[map], first);
    llvm::Value* address =
        b_.CreateAdd(b_.CreatePtrToInt(values_->buffer(store.map.buffer), b_.getInt64Ty()),
                     b_.CreateMul(element, i64(size)));
    llvm::Value* misaligned = b_.CreateAnd(address, i64(63));
    llvm::Value* bytes_to_line = b_.CreateAnd(b_.CreateSub(i64(64), misaligned), i64(63));
    llvm::Value* aligned = b_.CreateAdd(first, b_.CreateUDiv(bytes_to_line, i64(size)));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, aligned, stop);
  }

  // Reducing: [begin, end) is a range of rows.
  void emit_reducing() {
    allocate_row_caches();
    if (row_caches_.empty() || sizes_->constant_row_size()) {
      emit_rows(!row_caches_.empty());
      return;
    }
    // A size-generic row longer than the scratch arrays computes its values again in each pass.
    auto* cached = llvm::BasicBlock::Create(b_.getContext(), "cached_rows", fn_);
    auto* uncached = llvm::BasicBlock::Create(b_.getContext(), "uncached_rows", fn_);
    auto* done = llvm::BasicBlock::Create(b_.getContext(), "rows_done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(sizes_->row_size(), i64(kMaxCachedRow)), cached, uncached);
    for (auto [block, caching] : {std::pair{cached, true}, {uncached, false}}) {
      b_.SetInsertPoint(block);
      emit_rows(caching);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
  }

  /// The loop over the rows of [begin, end), with the row caches or without.
  void emit_rows(bool caching) {
    caching_ = caching;
    values_->forget_rows();
    values_->forget_elements();
    const int row_rank = kernel_.row_rank();
    const std::vector<RowPass>& passes = schedule_.row_passes;
    const std::vector<int>& streamed = schedule_.prefetched_maps;
    loop(begin(), end(), 1, [&](llvm::Value* row) {
      std::vector<llvm::Value*> offsets = row_offsets(row, row_rank);
      const Position at_row{1, i64(0), &offsets};
      if (!streamed.empty()) next_row_ = row_offsets(b_.CreateAdd(row, i64(1)), row_rank);
      compute_row_values(at_row);
      int pass = 0;
      for (const RowPass& row_pass : passes) {
        prefetch_maps_ = pass == 1 ? streamed : std::vector<int>{};
        use_row_caches(pass++);
        const std::vector<int>& ids = row_pass.reductions;
        if (row_pass.moments) {
          moments(ids[0], ids[1], offsets);
        } else {
          const std::vector<llvm::Value*> results = reduce(ids, offsets);
          for (size_t r = 0; r < ids.size(); ++r)
            values_->set_row_value(ids[r], results[r]);
        }
        compute_row_values(at_row);
      }
      prefetch_maps_ = pass == 1 ? streamed : std::vector<int>{};
      use_row_caches(pass);
      bool element_stores = false;
      for (size_t s = 0; s < kernel_.stores.size(); ++s) {
        if (kernel::stores_per_element(kernel_, kernel_.stores[s])) {
          element_stores = true;
        } else {
          values_->store(static_cast<int>(s), at_row);
        }
      }
      if (!element_stores) return;
      auto store_elements = [&](const Position& at, int) {
        prefetch_next_row(at);
        for (size_t s = 0; s < kernel_.stores.size(); ++s) {
          if (kernel::stores_per_element(kernel_, kernel_.stores[s]))
            values_->store(static_cast<int>(s), at);
        }
      };
      if (schedule_.streaming_stores) {
        // A large output (softmax, layer_norm) streams past the caches, as elementwise outputs
        // do: scalar steps up to the row's first 64-byte line, then non-temporal vector stores.
        llvm::Value* n = sizes_->size(kernel_.rank() - 1);
        llvm::Value* aligned = first_aligned_index(i64(0), n, offsets);
        inner_loop(i64(0), aligned, offsets, store_elements, 1, /*vectors=*/false);
        values_->set_streaming_stores(true);
        inner_loop(aligned, n, offsets, store_elements, 1);
        values_->set_streaming_stores(false);
        return;
      }
      row_loops(offsets, row_rank, store_elements, 1);
    });
  }

  /// During the pass that prefetches: one request per vector for each streamed map, the same
  /// element of the next row.
  void prefetch_next_row(const Position& at) {
    if (prefetch_maps_.empty() || at.width == 1) return;
    const Position next{at.width, at.index, &next_row_, at.dim};
    for (int m : prefetch_maps_)
      values_->prefetch(m, next);
  }

  // The per-row scratch arrays of the values the schedule caches (schedule_.row_caches): a
  // size-generic row gets the longest row that caches (emit_reducing checks it at run time).
  void allocate_row_caches() {
    llvm::IRBuilder<> entry(entry_, entry_->begin());
    const int64_t length = sizes_->constant_row_size() ? kernel_.row_size() : kMaxCachedRow;
    for (const RowCache& cache : schedule_.row_caches) {
      llvm::Type* type = values_->register_type(kernel_.exprs[cache.expr].dtype, 1);
      llvm::AllocaInst* scratch = entry.CreateAlloca(type, i64(length));
      // Cache-line aligned: a vector that straddles two lines costs two accesses, and the
      // scratch is written and read once per element.
      scratch->setAlignment(llvm::Align(64));
      row_caches_.push_back({cache.expr, cache.first_pass, scratch});
    }
  }

  void use_row_caches(int pass) {
    for (const auto& c : row_caches_) {
      const auto mode = !caching_              ? ValueEmitter::RowCacheMode::None
                        : pass == c.first_pass ? ValueEmitter::RowCacheMode::Store
                        : pass > c.first_pass  ? ValueEmitter::RowCacheMode::Load
                                               : ValueEmitter::RowCacheMode::None;
      values_->set_row_cache(c.expr, c.scratch, mode);
    }
  }

  llvm::Value* horizontal(ReduceKind kind, DType t, llvm::Value* vec) {
    const bool f = ir::is_floating(t);
    const bool u = t == DType::UInt8 || t == DType::Bool;
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
        if (!f) return b_.CreateAddReduce(vec);
        {
          // Lanes hold independent partial sums; their order does not matter.
          llvm::CallInst* sum = b_.CreateFAddReduce(
              llvm::ConstantFP::getNegativeZero(vec->getType()->getScalarType()), vec);
          sum->setHasAllowReassoc(true);
          return sum;
        }
      case ReduceKind::Max:
      case ReduceKind::Min:
        if (!f) {
          return kind == ReduceKind::Max ? b_.CreateIntMaxReduce(vec, !u)
                                         : b_.CreateIntMinReduce(vec, !u);
        }
        {
          // No NaN here: reduce() replaces the result when it saw one. Without NaNs to order
          // the lanes fold as a tree of vector max/min, not a chain of NaN-checking scalar steps.
          llvm::CallInst* folded =
              kind == ReduceKind::Max ? b_.CreateFPMaxReduce(vec) : b_.CreateFPMinReduce(vec);
          folded->setHasNoNaNs(true);
          return folded;
        }
    }
    return vec;
  }

  /// One pass over the row for the reductions `ids` (none reading another's result): per
  /// reduction schedule_.reduce_unroll vector accumulators and a scalar one for the tail, folded at
  /// the end; the element values they share are computed once per element. Float max/min also OR a
  /// "saw NaN" flag, which turns the result into NaN.
  std::vector<llvm::Value*> reduce(const std::vector<int>& ids,
                                   const std::vector<llvm::Value*>& offsets) {
    const int kUnroll = schedule_.reduce_unroll;
    struct Accumulator {
      const kernel::Expr* e;
      bool track_nan;
      std::vector<llvm::AllocaInst*> lanes = {}, nan_lanes = {};  // kUnroll each
      std::vector<llvm::AllocaInst*> row_lanes = {};  // a chunked float sum's: the chunks so far
      llvm::AllocaInst* scalar = nullptr;
      llvm::AllocaInst* saw_nan = nullptr;
    };
    llvm::IRBuilder<> entry(entry_, entry_->begin());
    auto slot = [&](llvm::Type* type, llvm::Value* initial) {
      llvm::AllocaInst* a = entry.CreateAlloca(type);
      b_.CreateStore(initial, a);
      return a;
    };
    std::vector<Accumulator> accs;
    for (int id : ids) {
      const kernel::Expr& e = kernel_.exprs[id];
      const DType t = e.dtype;
      Accumulator a{
          &e, ir::is_floating(t) && (e.reduce == ReduceKind::Max || e.reduce == ReduceKind::Min)};
      for (int k = 0; k < kUnroll; ++k)
        a.lanes.push_back(slot(values_->register_type(t, width_), identity(e.reduce, t, width_)));
      const bool chunked = chunks_rows() && ir::is_floating(t) &&
                           (e.reduce == ReduceKind::Sum || e.reduce == ReduceKind::Mean);
      for (int k = 0; chunked && k < kUnroll; ++k)
        a.row_lanes.push_back(
            slot(values_->register_type(t, width_), identity(e.reduce, t, width_)));
      a.scalar = slot(values_->register_type(t, 1), identity(e.reduce, t, 1));
      a.saw_nan = slot(b_.getInt1Ty(), b_.getFalse());
      if (a.track_nan) {
        llvm::Type* mask = values_->register_type(DType::Bool, width_);
        for (int k = 0; k < kUnroll; ++k)
          a.nan_lanes.push_back(slot(mask, llvm::Constant::getNullValue(mask)));
      }
      accs.push_back(std::move(a));
    }
    auto get = [&](llvm::AllocaInst* a) { return b_.CreateLoad(a->getAllocatedType(), a); };
    std::function<void()> end_chunk;
    if (std::any_of(accs.begin(), accs.end(),
                    [](const Accumulator& a) { return !a.row_lanes.empty(); })) {
      end_chunk = [&] {
        for (const Accumulator& a : accs) {
          for (size_t k = 0; k < a.row_lanes.size(); ++k) {
            const DType t = a.e->dtype;
            b_.CreateStore(combine(a.e->reduce, t, get(a.row_lanes[k]), get(a.lanes[k])),
                           a.row_lanes[k]);
            b_.CreateStore(identity(a.e->reduce, t, width_), a.lanes[k]);
          }
        }
      };
    }
    row_loops(
        offsets, kernel_.row_rank(),
        [&](const Position& at, int k) {
          prefetch_next_row(at);
          for (const Accumulator& a : accs) {
            const DType t = a.e->dtype;
            llvm::AllocaInst* target = k < 0 ? a.scalar : a.lanes[k];
            llvm::Value* v = values_->value(a.e->args[0], at);
            b_.CreateStore(combine(a.e->reduce, t, get(target), v), target);
            if (!a.track_nan) continue;
            llvm::AllocaInst* flag = k < 0 ? a.saw_nan : a.nan_lanes[k];
            b_.CreateStore(b_.CreateOr(get(flag), b_.CreateFCmpUNO(v, v)), flag);
          }
        },
        kUnroll, end_chunk);
    std::vector<llvm::Value*> results;
    for (const Accumulator& a : accs) {
      const DType t = a.e->dtype;
      auto lane = [&](int k) {
        llvm::Value* v = get(a.lanes[k]);
        return a.row_lanes.empty() ? v : combine(a.e->reduce, t, get(a.row_lanes[k]), v);
      };
      llvm::Value* vec = lane(0);
      for (int k = 1; k < kUnroll; ++k)
        vec = combine(a.e->reduce, t, vec, lane(k));
      llvm::Value* result = combine(a.e->reduce, t, get(a.scalar), horizontal(a.e->reduce, t, vec));
      if (a.track_nan) {
        llvm::Value* any = get(a.saw_nan);
        for (llvm::AllocaInst* lanes : a.nan_lanes)
          any = b_.CreateOr(any, b_.CreateOrReduce(get(lanes)));
        result = b_.CreateSelect(any, llvm::ConstantFP::getNaN(result->getType()), result);
      }
      results.push_back(finish_reduction(*a.e, result));
    }
    return results;
  }

  /// A row's mean and variance (exprs `mean_id` and `var_id`: variance_of) from one pass: per
  /// lane, the sums S1 of d = x - K and S2 of d * d, K the row's first vector (its first element
  /// K0 for the scalar tail); then each lane's mean K + S1/n and squared deviations S2 - S1 * S1/n
  /// merge into the row's (moments.h). A row whose variance comes out NaN or infinite takes the
  /// two passes instead.
  void moments(int mean_id, int var_id, const std::vector<llvm::Value*>& offsets) {
    const int kUnroll = schedule_.reduce_unroll;
    const DType t = kernel_.exprs[mean_id].dtype;
    const int x = kernel_.exprs[mean_id].args[0];
    llvm::BasicBlock* two_pass = llvm::BasicBlock::Create(b_.getContext(), "two_pass", fn_);
    if (!sizes_->constant_row_size()) {
      // A size-generic row shorter than a vector has no first vector to shift by.
      auto* one_pass = llvm::BasicBlock::Create(b_.getContext(), "one_pass", fn_);
      b_.CreateCondBr(b_.CreateICmpSGE(sizes_->row_size(), i64(width_)), one_pass, two_pass);
      b_.SetInsertPoint(one_pass);
    }
    llvm::IRBuilder<> entry(entry_, entry_->begin());
    auto zeroed = [&](int width) {
      llvm::AllocaInst* slot = entry.CreateAlloca(values_->register_type(t, width));
      b_.CreateStore(llvm::Constant::getNullValue(slot->getAllocatedType()), slot);
      return slot;
    };
    auto get = [&](llvm::AllocaInst* slot) {
      return b_.CreateLoad(slot->getAllocatedType(), slot);
    };
    llvm::Value* shift = values_->value(x, Position{width_, i64(0), &offsets});
    values_->forget_elements();
    llvm::Value* shift0 = b_.CreateExtractElement(shift, uint64_t{0});
    std::vector<llvm::AllocaInst*> sums, squares, row_sums, row_squares;  // row_: past chunks
    for (int k = 0; k < kUnroll; ++k) {
      sums.push_back(zeroed(width_));
      squares.push_back(zeroed(width_));
      if (!chunks_rows()) continue;
      row_sums.push_back(zeroed(width_));
      row_squares.push_back(zeroed(width_));
    }
    // The shift is the same for the whole row, so S1 and S2 are plain sums: chunked as reduce()'s.
    std::function<void()> end_chunk;
    if (chunks_rows()) {
      end_chunk = [&] {
        for (int k = 0; k < kUnroll; ++k) {
          for (auto [chunk, row] :
               {std::pair{sums[k], row_sums[k]}, {squares[k], row_squares[k]}}) {
            b_.CreateStore(b_.CreateFAdd(get(row), get(chunk)), row);
            b_.CreateStore(llvm::Constant::getNullValue(chunk->getAllocatedType()), chunk);
          }
        }
      };
    }
    llvm::AllocaInst* tail_sum = zeroed(1);
    llvm::AllocaInst* tail_squares = zeroed(1);
    row_loops(
        offsets, kernel_.row_rank(),
        [&](const Position& at, int k) {
          prefetch_next_row(at);
          llvm::Value* d = b_.CreateFSub(values_->value(x, at), k < 0 ? shift0 : shift);
          llvm::AllocaInst* sum = k < 0 ? tail_sum : sums[k];
          llvm::AllocaInst* square = k < 0 ? tail_squares : squares[k];
          b_.CreateStore(b_.CreateFAdd(get(sum), d), sum);
          b_.CreateStore(b_.CreateFAdd(get(square), b_.CreateFMul(d, d)), square);
        },
        kUnroll, end_chunk);
    llvm::Value* s1 = nullptr;
    llvm::Value* s2 = nullptr;
    for (int k = 0; k < kUnroll; ++k) {
      llvm::Value* lane_sum = get(sums[k]);
      llvm::Value* lane_squares = get(squares[k]);
      if (chunks_rows()) {
        lane_sum = b_.CreateFAdd(get(row_sums[k]), lane_sum);
        lane_squares = b_.CreateFAdd(get(row_squares[k]), lane_squares);
      }
      s1 = s1 ? b_.CreateFAdd(s1, lane_sum) : lane_sum;
      s2 = s2 ? b_.CreateFAdd(s2, lane_squares) : lane_squares;
    }
    llvm::Type* scalar = values_->register_type(t, 1);
    // Element counts as floats: constants where the row's length is (the builder folds them).
    auto count = [&](llvm::Value* c, int width) {
      return values_->splat(b_.CreateSIToFP(c, scalar), width);
    };
    auto sum_lanes = [&](llvm::Value* v) { return horizontal(ReduceKind::Sum, t, v); };
    auto square = [&](llvm::Value* v) { return b_.CreateFMul(v, v); };
    // The merge works relative to the first element K0 (names ending in _k0): lane means near a
    // large offset would lose their low bits to it, and their differences are what the variance
    // is made of.
    // Each lane holds nv elements; the tail's nt elements (shifted by K0) are one more group.
    llvm::Value* n = sizes_->row_size();
    llvm::Value* nv = b_.CreateUDiv(n, i64(width_));
    llvm::Value* nt = b_.CreateURem(n, i64(width_));
    const bool maybe_tail = !sizes_->constant_row_size() || kernel_.row_size() % width_ != 0;
    llvm::Value* lane_mean_d = b_.CreateFDiv(s1, count(nv, width_));
    llvm::Value* lane_means_k0 =
        b_.CreateFAdd(b_.CreateFSub(shift, values_->splat(shift0, width_)), lane_mean_d);
    llvm::Value* lane_m2 = b_.CreateFSub(s2, b_.CreateFMul(s1, lane_mean_d));
    llvm::Value* total = b_.CreateFMul(sum_lanes(lane_means_k0), count(nv, 1));
    llvm::Value* tail_mean_k0 = nullptr;
    if (maybe_tail) {
      // No tail at run time: its mean is 0/0, taken as 0 (its terms below are then 0).
      tail_mean_k0 =
          b_.CreateSelect(b_.CreateICmpNE(nt, i64(0)), b_.CreateFDiv(get(tail_sum), count(nt, 1)),
                          llvm::ConstantFP::get(scalar, 0.0));
      total = b_.CreateFAdd(total, b_.CreateFMul(tail_mean_k0, count(nt, 1)));
    }
    llvm::Value* mean_k0 = b_.CreateFDiv(total, count(n, 1));
    llvm::Value* apart = b_.CreateFSub(lane_means_k0, values_->splat(mean_k0, width_));
    llvm::Value* m2 =
        b_.CreateFAdd(sum_lanes(lane_m2), b_.CreateFMul(count(nv, 1), sum_lanes(square(apart))));
    if (maybe_tail) {
      llvm::Value* tail_m2 =
          b_.CreateFSub(get(tail_squares), b_.CreateFMul(get(tail_sum), tail_mean_k0));
      m2 = b_.CreateFAdd(
          m2, b_.CreateFAdd(tail_m2, b_.CreateFMul(count(nt, 1),
                                                   square(b_.CreateFSub(tail_mean_k0, mean_k0)))));
    }
    llvm::Value* mean = b_.CreateFAdd(shift0, mean_k0);
    llvm::Value* var = b_.CreateFDiv(m2, count(n, 1));
    // A row with a NaN or an infinity, or whose sums overflow (S2 and S1 * S1/n both infinite
    // make NaN where the two passes make an infinite variance): its variance is not finite, and
    // the row is computed again the two-pass way, with the kernel's own results for it.
    llvm::Value* finite = b_.CreateFCmpOLT(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, var),
                                           llvm::ConstantFP::getInfinity(scalar));
    llvm::BasicBlock* one_pass = b_.GetInsertBlock();
    llvm::BasicBlock* done = llvm::BasicBlock::Create(b_.getContext(), "moments_done", fn_);
    b_.CreateCondBr(finite, done, two_pass);
    b_.SetInsertPoint(two_pass);
    llvm::Value* exact_mean = reduce({mean_id}, offsets)[0];
    values_->set_row_value(mean_id, exact_mean);
    llvm::Value* exact_var = reduce({var_id}, offsets)[0];
    llvm::BasicBlock* two_pass_end = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    auto merged = [&](llvm::Value* fast, llvm::Value* exact) {
      llvm::PHINode* phi = b_.CreatePHI(scalar, 2);
      phi->addIncoming(fast, one_pass);
      phi->addIncoming(exact, two_pass_end);
      return phi;
    };
    values_->set_row_value(mean_id, merged(mean, exact_mean));
    values_->set_row_value(var_id, merged(var, exact_var));
  }

  struct RowCacheSlot {
    int expr;
    int first_pass;
    llvm::Value* scratch;
  };
  const CpuSchedule schedule_;
  std::vector<RowCacheSlot> row_caches_;
  bool caching_ = false;            // whether the rows being emitted use row_caches_
  std::vector<int> prefetch_maps_;  // maps prefetch_next_row asks for, in the current pass
  Offsets next_row_;                // every map's offsets at the next row
};

/// A size-generic kernel less its example binding: its code reads each term's value at run time,
/// and what the example decided is in the schedule (keyed beside it). The same as `kernel` for a
/// kernel of constant sizes.
kernel::Kernel generic_code_key(const kernel::Kernel& kernel) {
  if (kernel.size_inputs.empty()) return kernel;
  kernel::Kernel key = kernel;
  std::fill(key.size_inputs.begin(), key.size_inputs.end(), -1);
  for (size_t d = 0; d < key.size_terms.size(); ++d)  // none when only strides or constants vary
    if (key.size_terms[d]) key.sizes[d] = -1;
  for (kernel::IndexMap* map : kernel::accesses(key)) {
    for (size_t d = 0; d < map->stride_terms.size(); ++d)
      if (map->stride_terms[d]) map->strides[d] = -1;
    if (map->offset_term) map->offset = -1;
  }
  for (kernel::Expr& e : key.exprs)
    if (e.constant_term) e.constant = -1;
  return key;
}

}  // namespace

kernel::Kernel code_key(const kernel::Kernel& collapsed, const CpuSchedule& schedule) {
  // Every decision that depends on the sizes is in the schedule, which the cache keys on too.
  // Beyond it the emitters read the outermost size only when it is not the launch range's: a
  // reduction across rows, a two-dim transposing kernel (its tiles walk that dim), a kernel
  // whose only dims are reduced, and a split one (its partials are laid out by its rows).
  // Everywhere else the outermost index comes from the launch range.
  if (schedule.strategy == CpuSchedule::Strategy::AcrossRows) return generic_code_key(collapsed);
  if (collapsed.split_pieces > 0) return collapsed;
  if (schedule.strategy == CpuSchedule::Strategy::Transpose && collapsed.rank() == 2)
    return generic_code_key(collapsed);
  if (collapsed.reduce_rank > 0 && collapsed.row_rank() == 0) return generic_code_key(collapsed);
  for (int64_t d : collapsed.sizes)
    if (d == 0) return generic_code_key(collapsed);
  kernel::Kernel key = generic_code_key(collapsed);
  key.sizes[0] = -1;
  return key;
}

llvm::Function* emit_kernel(llvm::Module& module, const kernel::Kernel& kernel,
                            const CpuSchedule& schedule, MathTarget math) {
  switch (schedule.strategy) {
    case CpuSchedule::Strategy::AcrossRows:
      return emit_across_rows_kernel(module, kernel, schedule.vector_bits, math,
                                     schedule.sum_chunk);
    case CpuSchedule::Strategy::Transpose:
      return emit_transpose_kernel(module, kernel, schedule.vector_bits, math);
    case CpuSchedule::Strategy::Elementwise:
    case CpuSchedule::Strategy::AlongRows:
      break;
  }
  return KernelEmitter(module, kernel, schedule, math).emit();
}

}  // namespace kiln::codegen
