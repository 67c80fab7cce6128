#include "passes/kernel/kernel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

#include "passes/kernel/size_terms.h"

namespace kiln::kernel {
namespace {

using enum Operands;

// In the order of Op (op_traits indexes it; a test checks the order).
constexpr OpTraits kOps[] = {
    {Op::Load, "load", 0, Any, false},
    {Op::Constant, "const", 0, Any, false},
    {Op::Cast, "cast", 1, Any, false},
    {Op::Neg, "neg", 1, Any, false},
    {Op::Abs, "abs", 1, Any, false},
    {Op::Exp, "exp", 1, Float, true},
    {Op::Log, "log", 1, Float, true},
    {Op::Sqrt, "sqrt", 1, Float, false},
    {Op::Rsqrt, "rsqrt", 1, Float, false},
    {Op::Reciprocal, "recip", 1, Float, false},
    {Op::Erf, "erf", 1, Float, true},
    {Op::Tanh, "tanh", 1, Float, true},
    {Op::Sigmoid, "sigmoid", 1, Float, true},
    {Op::Floor, "floor", 1, Any, false},
    {Op::Trunc, "trunc", 1, Any, false},
    {Op::Not, "not", 1, Bool, false},
    {Op::Add, "add", 2, Any, false},
    {Op::Sub, "sub", 2, Any, false},
    {Op::Mul, "mul", 2, Any, false},
    {Op::Div, "div", 2, Any, false},
    {Op::Max, "max", 2, Any, false},
    {Op::Min, "min", 2, Any, false},
    {Op::Eq, "eq", 2, Any, false},
    {Op::Ne, "ne", 2, Any, false},
    {Op::Lt, "lt", 2, Any, false},
    {Op::Le, "le", 2, Any, false},
    {Op::Gt, "gt", 2, Any, false},
    {Op::Ge, "ge", 2, Any, false},
    {Op::And, "and", 2, Bool, false},
    {Op::Or, "or", 2, Bool, false},
    {Op::Where, "where", 3, Any, false},
    {Op::Reduce, "reduce", 1, Any, false},
};

}  // namespace

std::span<const OpTraits> all_op_traits() {
  return kOps;
}
const OpTraits& op_traits(Op op) {
  return kOps[static_cast<int>(op)];
}
const char* op_name(Op op) {
  return op_traits(op).name;
}
int op_arity(Op op) {
  return op_traits(op).arity;
}

bool defined_on(Op op, DType dtype) {
  switch (op_traits(op).operands) {
    case Operands::Any:
      return true;
    case Operands::Float:
      return ir::is_floating(dtype);
    case Operands::Bool:
      return dtype == DType::Bool;
  }
  return false;
}

std::optional<std::string> first_uncovered_op(const Kernel& kernel, const OpCoverage& covers) {
  for (const Expr& e : kernel.exprs) {
    // Where's operands are its branches (args 1 and 2); every other op's is its first argument.
    const int operand = e.op == Op::Where ? 1 : 0;
    const DType t = e.args.empty() ? e.dtype : kernel.exprs[e.args[operand]].dtype;
    if (!covers(e.op, t)) return std::string(op_name(e.op)) + " on " + ir::dtype_name(t);
  }
  return std::nullopt;
}
bool is_comparison(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge;
}

const char* reduce_kind_name(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Mean:
      return "mean";
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
  }
  return "?";
}

int64_t Kernel::num_rows() const {
  int64_t n = 1;
  for (int d = 0; d < row_rank(); ++d)
    n *= sizes[d];
  return n;
}

int64_t Kernel::row_size() const {
  int64_t n = 1;
  for (int d = row_rank(); d < rank(); ++d)
    n *= sizes[d];
  return n;
}

namespace {

bool same_map(const IndexMap& a, const IndexMap& b) {
  return a.buffer == b.buffer && a.strides == b.strides && a.offset == b.offset &&
         a.stride_terms == b.stride_terms && a.offset_term == b.offset_term;
}

bool same_expr(const Expr& a, const Expr& b) {
  return a.op == b.op && a.dtype == b.dtype && a.args == b.args &&
         std::bit_cast<uint64_t>(a.constant) == std::bit_cast<uint64_t>(b.constant) &&
         a.constant_term == b.constant_term && same_map(a.map, b.map) && a.reduce == b.reduce;
}

template <typename T, typename Same>
bool all_same(const std::vector<T>& a, const std::vector<T>& b, Same same) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same);
}

}  // namespace

bool same_computation(const Kernel& a, const Kernel& b) {
  auto same_buffer = [](const Buffer& x, const Buffer& y) {
    return x.dtype == y.dtype && x.is_output == y.is_output;
  };
  auto same_store = [](const Store& x, const Store& y) {
    return x.value == y.value && same_map(x.map, y.map);
  };
  return a.sizes == b.sizes && a.size_inputs == b.size_inputs && a.size_terms == b.size_terms &&
         a.reduce_rank == b.reduce_rank && a.in_place == b.in_place &&
         a.split_pieces == b.split_pieces && all_same(a.buffers, b.buffers, same_buffer) &&
         all_same(a.exprs, b.exprs, same_expr) && all_same(a.stores, b.stores, same_store);
}

std::vector<const IndexMap*> accesses(const Kernel& kernel) {
  std::vector<const IndexMap*> maps;
  for (const Expr& e : kernel.exprs)
    if (e.op == Op::Load) maps.push_back(&e.map);
  for (const Store& s : kernel.stores)
    maps.push_back(&s.map);
  return maps;
}

std::vector<IndexMap*> accesses(Kernel& kernel) {
  std::vector<IndexMap*> maps;
  for (Expr& e : kernel.exprs)
    if (e.op == Op::Load) maps.push_back(&e.map);
  for (Store& s : kernel.stores)
    maps.push_back(&s.map);
  return maps;
}

DistinctKernels distinct_kernels(const std::vector<Kernel>& kernels) {
  // Quadratic in the distinct kernels, but kernels of other sizes differ at the first compare.
  DistinctKernels distinct;
  for (const Kernel& k : kernels) {
    auto same = [&](const Kernel& seen) { return same_computation(k, seen); };
    auto it = std::find_if(distinct.kernels.begin(), distinct.kernels.end(), same);
    distinct.index.push_back(static_cast<size_t>(it - distinct.kernels.begin()));
    if (it == distinct.kernels.end()) distinct.kernels.push_back(k);
  }
  return distinct;
}

int Kernel::num_inputs() const {
  int n = 0;
  for (const auto& b : buffers)
    n += b.is_output ? 0 : 1;
  return n;
}

namespace {

/// Whether `map` moves along dim `d`: a nonzero stride, or a term (which a binding may make 0,
/// but a value's level is the same at every binding of a size-generic kernel).
bool moves_along(const IndexMap& map, int d) {
  return map.strides[d] != 0 || (!map.stride_terms.empty() && map.stride_terms[d]);
}

}  // namespace

std::vector<bool> element_levels(const Kernel& kernel) {
  std::vector<bool> element(kernel.exprs.size(), false);
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    const Expr& e = kernel.exprs[i];
    if (e.op == Op::Load) {
      bool inner = kernel.reduce_rank == 0;
      for (int d = kernel.row_rank(); d < kernel.rank(); ++d)
        inner = inner || moves_along(e.map, d);
      element[i] = inner;
    } else if (e.op != Op::Reduce && e.op != Op::Constant) {
      for (int a : e.args)
        element[i] = element[i] || element[a];
    }
  }
  return element;
}

bool stores_per_element(const Kernel& kernel, const Store& store) {
  if (kernel.reduce_rank == 0) return true;
  // A kernel without rows stores nothing, and its outputs' strides are what ATen gives an empty
  // tensor (channels-last [64, 0, 128, 1]: {0, 1, 0, 0}), which say nothing of rows. (Empty
  // rows are another matter: each still stores its reductions' identities, a sum's 0.)
  const auto row_dims_end = kernel.sizes.begin() + kernel.row_rank();
  if (std::find(kernel.sizes.begin(), row_dims_end, 0) != row_dims_end) return true;
  for (int d = kernel.row_rank(); d < kernel.rank(); ++d)
    if (moves_along(store.map, d)) return true;
  return false;
}

std::optional<int> variance_of(const Kernel& kernel, int mean) {
  const auto& exprs = kernel.exprs;
  const Expr& m = exprs.at(mean);
  if (m.op != Op::Reduce || m.reduce != ReduceKind::Mean) return std::nullopt;
  if (m.dtype != DType::Float32 && m.dtype != DType::Float64) return std::nullopt;
  const int x = m.args[0];
  if (exprs[x].dtype != m.dtype) return std::nullopt;
  for (size_t v = mean + 1; v < exprs.size(); ++v) {
    const Expr& var = exprs[v];
    if (var.op != Op::Reduce || var.reduce != ReduceKind::Mean || var.dtype != m.dtype) continue;
    const Expr& square = exprs[var.args[0]];
    if (square.op != Op::Mul || square.args[0] != square.args[1]) continue;
    const Expr& deviation = exprs[square.args[0]];
    if (deviation.op == Op::Sub && deviation.args[0] == x && deviation.args[1] == mean &&
        deviation.dtype == m.dtype && square.dtype == m.dtype) {
      return static_cast<int>(v);
    }
  }
  return std::nullopt;
}

void validate(const Kernel& kernel) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("kernel " + kernel.name + ": " + why);
  };
  if (kernel.reduce_rank < 0 || kernel.reduce_rank > kernel.rank()) fail("bad reduce_rank");
  bool seen_output = false;
  for (const auto& b : kernel.buffers) {
    if (!b.is_output && seen_output) fail("inputs must come before outputs");
    seen_output = seen_output || b.is_output;
  }
  auto check_map = [&](const IndexMap& map, bool output) {
    if (map.buffer < 0 || map.buffer >= static_cast<int>(kernel.buffers.size()))
      fail("index map names no buffer");
    if (kernel.buffers[map.buffer].is_output != output)
      fail(output ? "store into an input buffer" : "load from an output buffer");
    if (static_cast<int>(map.strides.size()) != kernel.rank()) fail("index map of wrong rank");
  };
  const std::vector<bool> element = element_levels(kernel);
  for (size_t i = 0; i < kernel.exprs.size(); ++i) {
    const Expr& e = kernel.exprs[i];
    if (static_cast<int>(e.args.size()) != op_arity(e.op))
      fail(std::string(op_name(e.op)) + " has the wrong number of arguments");
    for (int a : e.args) {
      if (a < 0 || a >= static_cast<int>(i)) fail("an expr reads a later or unknown expr");
    }
    if (e.op == Op::Load) check_map(e.map, false);
    if (e.op == Op::Reduce) {
      if (kernel.reduce_rank == 0) fail("reduce in a kernel without reduced dimensions");
      if (!element[e.args[0]]) fail("reduce of a row-level value");
    }
    if (is_comparison(e.op) && e.dtype != DType::Bool) fail("comparison not of type bool");
  }
  for (const Store& s : kernel.stores) {
    check_map(s.map, true);
    if (s.value < 0 || s.value >= static_cast<int>(kernel.exprs.size()))
      fail("store of an unknown expr");
    if (element[s.value] && !stores_per_element(kernel, s))
      fail("an element-level value stored once per row");
  }
  if (std::string problem = size_term_problem(kernel); !problem.empty()) fail(problem);
}

int KernelBuilder::add(Expr expr) {
  kernel_.exprs.push_back(std::move(expr));
  return static_cast<int>(kernel_.exprs.size()) - 1;
}

int KernelBuilder::load(int buffer, std::vector<int64_t> strides, int64_t offset) {
  Expr e{Op::Load, kernel_.buffers.at(buffer).dtype, {}};
  e.map = {buffer, std::move(strides), offset};
  return add(std::move(e));
}

int KernelBuilder::constant(double value, DType dtype) {
  Expr e{Op::Constant, dtype, {}};
  e.constant = value;
  return add(std::move(e));
}

int KernelBuilder::unary(Op op, int arg, DType dtype) {
  return add(Expr{op, dtype, {arg}});
}

int KernelBuilder::binary(Op op, int a, int b, DType dtype) {
  return add(Expr{op, is_comparison(op) ? DType::Bool : dtype, {a, b}});
}

int KernelBuilder::where(int condition, int then_value, int else_value, DType dtype) {
  return add(Expr{Op::Where, dtype, {condition, then_value, else_value}});
}

int KernelBuilder::cast(int arg, DType dtype) {
  if (kernel_.exprs.at(arg).dtype == dtype) return arg;
  return add(Expr{Op::Cast, dtype, {arg}});
}

int KernelBuilder::reduce(ReduceKind kind, int arg) {
  // A value that is the same across the row (it broadcasts over every reduced dim) needs no
  // pass over the row: n copies of v sum to n * v; their mean, max and min are v.
  if (!element_levels(kernel_).at(arg)) {
    const DType t = kernel_.exprs.at(arg).dtype;
    const int64_t n = kernel_.row_size();
    switch (kind) {
      case ReduceKind::Sum:
        return binary(Op::Mul, arg, constant(static_cast<double>(n), t), t);
      case ReduceKind::Mean:
        return n == 0 ? constant(NAN, t) : arg;
      case ReduceKind::Max:
      case ReduceKind::Min:
        if (n > 0) return arg;
        break;  // an empty row: fall through to a real (empty) reduction, which gives the identity
    }
  }
  Expr e{Op::Reduce, kernel_.exprs.at(arg).dtype, {arg}};
  e.reduce = kind;
  return add(std::move(e));
}

void KernelBuilder::store(int buffer, std::vector<int64_t> strides, int value, int64_t offset) {
  kernel_.stores.push_back({{buffer, std::move(strides), offset}, value});
}

}  // namespace kiln::kernel
