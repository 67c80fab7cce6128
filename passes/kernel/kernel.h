// The kernel IR: one kernel, target-neutral.
//
// A kernel walks an iteration space (static sizes). Its last `reduce_rank` dimensions may be
// reduced: the leading dimensions are then "rows" and the trailing ones the "elements" of a
// row. Buffers are the kernel's parameters (inputs, then outputs). A Load reads a buffer through
// an index map (one stride per iteration dimension, 0 where it broadcasts); the element
// expressions form a DAG in SSA order (each Expr reads only earlier ones); a Reduce folds an
// element-level expression over a row into a row-level value; a Store writes a value through an
// index map.
//
// It says nothing about threads, vectors or loop order: a code generator decides. Every value
// has a level: row-level values depend only on the row (Reduce results, loads whose map has
// stride 0 and no size term on every reduced dimension, constants), element-level values on the
// element too.
// The reference interpreter (interpreter.h) defines what a kernel computes.
//
//   kernel softmax_0 [4096, 1024] reduce 1
//     in  b0: f32
//     out b1: f32
//     %0 = load b0 [1024, 1] : f32
//     %1 = reduce.max %0 : f32
//     ...
//     store b1 [1024, 1] = %5
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "passes/ir/types.h"

namespace kiln::kernel {

using ir::DType;

enum class Op : uint8_t {
  Load,      // load: reads its buffer through its index map
  Constant,  // value (in `constant`, converted to the dtype)
  Cast,      // 1 arg, converted to the expr's dtype (float -> int truncates, NaN, inf and out of
             // range as eager on x86: scalar_convert.h; -> bool is != 0)
  // Unary, on the expr's dtype.
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Erf,
  Tanh,
  Sigmoid,
  Floor,
  Trunc,
  Not,  // bool
  // Binary, both args of the expr's dtype (comparisons: args of one dtype, result bool).
  Add,
  Sub,
  Mul,
  Div,  // floats: IEEE division; integers: truncating
  Max,  // NaN-propagating, like torch.maximum
  Min,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,  // bool
  Or,   // bool
  // Ternary: args (bool condition, then, else).
  Where,
  Reduce,  // 1 element-level arg over the reduced dims of a row; result is row-level
};

enum class ReduceKind : uint8_t { Sum, Mean, Max, Min };

// Reductions: sum and mean are exact up to reassociation (a code generator may sum in any order;
// stated accuracy for float sums: a relative error of a few ulp times log2(n)); max and min
// propagate NaN.

/// The operand dtypes an op is defined on: any (bool counts as the integer 0 or 1), floats only
/// (the math functions), or bools only (logical not, and, or: on integers they would be bitwise
/// in one backend and logical in another).
enum class Operands : uint8_t { Any, Float, Bool };

/// What the kernel IR says about one op, written once (kernel.cpp) and read by validation,
/// schedules, code generators and tests.
struct OpTraits {
  Op op;
  const char* name;
  int arity;
  Operands operands;
  /// A polynomial of about 20 vector instructions per element on the CPU (schedule.h's cost).
  bool transcendental;
};

/// Every op's traits, in the order of Op.
std::span<const OpTraits> all_op_traits();
const OpTraits& op_traits(Op op);
const char* op_name(Op op);
const char* reduce_kind_name(ReduceKind kind);
int op_arity(Op op);
bool is_comparison(Op op);
/// Whether `op` is defined on operands of `dtype` (its first argument's dtype).
bool defined_on(Op op, DType dtype);

struct Buffer {
  std::string name;  // b0, b1, ...
  DType dtype;
  bool is_output;
};

/// One factor of a SizeTerm: its size input times `scale` plus `shift`. An image side floored
/// by a stride moves with the input that counts the side's steps but from another origin: past
/// an unpadded stride-2 pool a side of 2*s is s - 1, and a ResNet's side of 32*s + 1 is 8*s + 1
/// after its stem. Canonical: scale >= 1 and gcd(scale, |shift|) = 1 (size_terms.h).
struct FactorForm {
  int64_t scale = 1;
  int64_t shift = 0;
  bool operator==(const FactorForm&) const = default;
  auto operator<=>(const FactorForm&) const = default;
};

/// An integer of a size-generic kernel that varies from call to call: `coefficient` times the
/// product of the run-time size inputs `factors` names (indices into Kernel::size_inputs, sorted,
/// repeats allowed), each in its form (`forms`, one per factor, or empty where every factor is
/// its input itself), plus `constant` (a KV cache's length plus one, and what collapse_dims makes
/// of it times constant sizes). A constant is a term without factors (and `constant` 0). See
/// size_terms.h.
struct SizeTerm {
  int64_t coefficient = 1;
  std::vector<int> factors;
  int64_t constant = 0;
  std::vector<FactorForm> forms = {};
  bool operator==(const SizeTerm&) const = default;
};

/// Element `i` of the iteration space is at element offset  offset + sum_d i[d] * strides[d]
/// of the buffer.
struct IndexMap {
  int buffer = 0;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  /// Size-generic kernels: per dim, the term a stride follows (none: constant), and the offset's.
  /// Empty in a kernel of constant sizes; `strides` and `offset` hold the example values.
  std::vector<std::optional<SizeTerm>> stride_terms = {};
  std::optional<SizeTerm> offset_term = std::nullopt;
};

struct Expr {
  Op op;
  DType dtype;
  std::vector<int> args;  // ids of earlier exprs
  double constant = 0;    // Constant (integers up to 2^53 are exact)
  /// Size-generic kernels, Constant only: the term the value follows (a KV cache's length as a
  /// position); `constant` holds its value at the example binding.
  std::optional<SizeTerm> constant_term = std::nullopt;
  IndexMap map = {};  // Load
  ReduceKind reduce = ReduceKind::Sum;
};

struct Store {
  IndexMap map;
  int value;  // expr id
};

struct Kernel {
  std::string name;
  std::vector<int64_t> sizes;
  int reduce_rank = 0;
  std::vector<Buffer> buffers;  // inputs first, then outputs
  std::vector<Expr> exprs;
  std::vector<Store> stores;
  /// (input, output) buffer pairs the runtime gives the same memory (see in_place.h); a code
  /// generator must not assume that such a pair does not alias.
  std::vector<std::pair<int, int>> in_place;
  /// Size-generic kernels (size_terms.h): the example value of each run-time size input, and per
  /// dim the term its size follows (none: a constant). Both empty in a kernel of constant sizes;
  /// `sizes` holds the example values.
  std::vector<int64_t> size_inputs;
  std::vector<std::optional<SizeTerm>> size_terms;
  /// A full reduction the pipeline splits into this many pieces that threads share, each
  /// reducing a slice into a workspace, then a finish phase (split_reductions pass,
  /// split_reduction.h); 0: one thread walks it. The code generator performs the split.
  int64_t split_pieces = 0;

  int rank() const { return static_cast<int>(sizes.size()); }
  int row_rank() const { return rank() - reduce_rank; }
  /// Number of rows (product of the leading sizes) and of elements per row.
  int64_t num_rows() const;
  int64_t row_size() const;
  int num_inputs() const;
};

/// The kernel's index maps in a fixed order: its loads', in expr order, then its stores'.
std::vector<const IndexMap*> accesses(const Kernel& kernel);
std::vector<IndexMap*> accesses(Kernel& kernel);

/// Whether the two kernels compute the same thing, buffer by buffer: everything but their names
/// is equal (constants bit for bit, so 0.0 and -0.0 differ). A plan's repeated layers lower to
/// such kernels, and a code generator compiles each only once.
bool same_computation(const Kernel& a, const Kernel& b);

/// The kernels of a plan with repeats (same_computation) left out, and where each kernel of the
/// plan is among them.
struct DistinctKernels {
  std::vector<Kernel> kernels;
  std::vector<size_t> index;  // per kernel of the plan
};
DistinctKernels distinct_kernels(const std::vector<Kernel>& kernels);

/// True when the value depends on the position inside a row (for reduce_rank == 0 every
/// load and everything computed from one is element-level too).
std::vector<bool> element_levels(const Kernel& kernel);

/// Whether a store writes each element of its row (its map moves along a reduced dim; in a
/// kernel without reduced dims, every store) rather than once per row. A row-level value may
/// be stored either way (per element, each element of the row gets the same value); an
/// element-level value only per element. Every store of a kernel without rows (a row dim of
/// size 0) counts as per element: it stores nothing.
bool stores_per_element(const Kernel& kernel, const Store& store);

/// For a float32 or float64 Mean reduction `mean` of x, the id of a later Mean reduction of
/// (x - mean) * (x - mean): its variance, as a layer norm or x.var() lowers to; nullopt if the
/// kernel has none. A code generator may compute the two together (one pass over a row), and a
/// full reduction split into pieces merges the pieces' means and variances.
std::optional<int> variance_of(const Kernel& kernel, int mean);

/// Checks the structural rules above; throws std::invalid_argument with the reason.
void validate(const Kernel& kernel);

/// Which (op, operand dtype) pairs a code generator emits; each generator declares its own.
using OpCoverage = std::function<bool(Op op, DType operand)>;
/// The first expr of `kernel` whose op `covers` rejects, described ("div on i32"), or nullopt.
/// Code generators call it before emitting, so a missing case is a compile-time fallback with a
/// reason, never a surprise halfway through a kernel.
std::optional<std::string> first_uncovered_op(const Kernel& kernel, const OpCoverage& covers);

/// Appends exprs and stores to a kernel, keeping them in SSA order.
class KernelBuilder {
 public:
  explicit KernelBuilder(Kernel& kernel) : kernel_(kernel) {}
  int load(int buffer, std::vector<int64_t> strides, int64_t offset = 0);
  int constant(double value, DType dtype);
  int unary(Op op, int arg, DType dtype);
  int binary(Op op, int a, int b, DType dtype);
  int where(int condition, int then_value, int else_value, DType dtype);
  int cast(int arg, DType dtype);  // no-op when arg already has dtype
  int reduce(ReduceKind kind, int arg);
  void store(int buffer, std::vector<int64_t> strides, int value, int64_t offset = 0);
  DType dtype(int expr) const { return kernel_.exprs.at(expr).dtype; }
  Kernel& kernel() { return kernel_; }

 private:
  int add(Expr expr);
  Kernel& kernel_;
};

}  // namespace kiln::kernel
