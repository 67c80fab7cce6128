// Emits the LLVM IR of kernel-IR expressions at one position of the iteration space, either as
// one element (width 1) or as `width` consecutive elements of the innermost dimension at once.
//
// In registers, bool is i1, integers are iN, and float16/bfloat16/float32 are all float (a value
// of a 16-bit float dtype is a float that the format can represent exactly); float64 is double.
// Memory holds each dtype in its own format; loads and stores convert.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <unordered_map>
#include <vector>

#include "backend/codegen/llvm/math.h"
#include "backend/codegen/llvm/size_values.h"
#include "passes/kernel/kernel.h"

namespace kiln::codegen {

/// Where the code being emitted stands: `width` elements starting at index `index` of dimension
/// `dim` (the innermost one when -1); `offsets[m]` is the element offset of map m (see map_id) at
/// index 0 of that dimension. Kernels reducing across rows (schedule.h) walk a row dimension.
struct Position {
  int width = 1;
  llvm::Value* index = nullptr;  // i64
  const std::vector<llvm::Value*>* offsets = nullptr;
  int dim = -1;
};

class ValueEmitter {
 public:
  /// `sizes` gives the strides a size-generic kernel computes at run time.
  ValueEmitter(llvm::IRBuilder<>& builder, const kernel::Kernel& kernel,
               std::vector<llvm::Value*> buffer_pointers, MathTarget math, SizeValues* sizes);

  /// Maps are numbered: the load of expr e is map e; store s is map exprs.size() + s.
  int load_map_id(int expr) const { return expr; }
  int store_map_id(int store) const { return static_cast<int>(kernel_.exprs.size()) + store; }
  const kernel::IndexMap& map(int id) const;

  /// The value of expr `id` at `at` (a vector when at.width > 1). Element values are memoized
  /// until forget_elements(); row values must have been set with set_row_value.
  llvm::Value* value(int id, const Position& at);
  void store(int store_index, const Position& at);
  void forget_elements() { element_cache_.clear(); }
  /// Gives expr `id` this value at the current position until forget_elements() (a load the
  /// caller has already made, as the transposing emitter does for a tile).
  void set_element(int id, llvm::Value* value) { element_cache_[id] = value; }

  /// A per-row scratch array for an element value that several passes over a row need (a
  /// softmax's exp): the first pass stores it there, the later ones load it instead of computing
  /// it again. Indexed by the innermost index, so only for kernels with one reduced dim.
  enum class RowCacheMode { None, Store, Load };
  void set_row_cache(int id, llvm::Value* scratch, RowCacheMode mode) {
    row_cache_[id] = {scratch, mode};
  }

  /// A row value: a scalar, or one lane per row when the kernel is vectorized across rows.
  void set_row_value(int id, llvm::Value* value) { row_values_[id] = value; }
  void forget_rows() { row_values_.clear(); }
  /// Vector stores from now on are non-temporal and aligned to their size (the caller peeled
  /// the loop to an aligned start).
  void set_streaming_stores(bool on) { streaming_ = on; }
  llvm::Value* buffer(int index) const { return buffers_.at(index); }
  /// Asks the cache for the line that map `map_id` reads at `at` (a hint: never faults, so the
  /// address may lie past the buffer).
  void prefetch(int map_id, const Position& at);
  bool has_row_value(int id) const { return row_values_.contains(id); }
  /// Computes a row-level expr (not a Reduce) from row values already set.
  llvm::Value* row_expr(int id, const Position& row);

  /// The register type of a dtype, scalar or vector.
  llvm::Type* register_type(kernel::DType dtype, int width) const;
  llvm::Value* convert(llvm::Value* v, kernel::DType from, kernel::DType to);
  llvm::Value* splat(llvm::Value* scalar, int width);
  /// Float max/min where NaN wins, as torch.maximum/minimum and amax/amin.
  llvm::Value* nan_propagating(llvm::Value* a, llvm::Value* b, bool max);

 private:
  /// A float (held as float or double) to an integer dtype, defined for every input.
  llvm::Value* float_to_integer(llvm::Value* v, kernel::DType from, kernel::DType to, int width);
  llvm::Value* compute(const kernel::Expr& e, const std::vector<llvm::Value*>& args, int width,
                       const Position& at);
  llvm::Value* load(const kernel::IndexMap& map, int map_id, const Position& at);
  llvm::Value* address(int map_id, const Position& at, llvm::Value* lane_index);
  /// The stride of a map along the dimension that `at` walks (its example value: a size-generic
  /// kernel's terms are never 0 or 1 there, so it says which kind of access to emit).
  static int64_t stride_at(const kernel::IndexMap& map, const Position& at) {
    return at.dim < 0 ? map.strides.back() : map.strides[at.dim];
  }
  llvm::Value* unary(const kernel::Expr& e, llvm::Value* x);
  /// Whether expr `id` is x - max(x) over the row (softmax's shift): <= 0, or NaN.
  bool is_shifted_by_row_max(int id) const;
  llvm::Value* binary(const kernel::Expr& e, llvm::Value* a, llvm::Value* b, kernel::DType arg);
  llvm::Value* libm_per_lane(const char* name, llvm::Value* x);
  llvm::Value* round_to_bfloat16(llvm::Value* v);
  llvm::Value* constant(double value, kernel::DType dtype, int width);
  /// A Constant expr's value: its constant, or for a size-generic one its term at this call.
  llvm::Value* constant_of(const kernel::Expr& e, int width);
  /// Marks a load or store of `buffer` with its alias scope.
  llvm::Instruction* tag(llvm::Instruction* access, int buffer);

  llvm::IRBuilder<>& b_;
  const kernel::Kernel& kernel_;
  std::vector<llvm::Value*> buffers_;
  std::vector<bool> element_;
  std::unordered_map<int, llvm::Value*> element_cache_;
  std::unordered_map<int, llvm::Value*> row_values_;
  struct CachedRow {
    llvm::Value* scratch;
    RowCacheMode mode;
  };
  std::unordered_map<int, CachedRow> row_cache_;
  bool streaming_ = false;
  MathTarget math_;
  SizeValues* sizes_;
  std::vector<llvm::MDNode*> scope_;    // per buffer: its own scope
  std::vector<llvm::MDNode*> noalias_;  // per buffer: every other buffer's scope
};

}  // namespace kiln::codegen
