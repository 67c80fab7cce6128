#include "passes/kernel/interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "passes/kernel/scalar_convert.h"

namespace kiln::kernel {
namespace {

// One value: floats in `f`, integers and bools in `i`.
struct Scalar {
  double f = 0;
  int64_t i = 0;
};

bool is_float(DType t) {
  return ir::is_floating(t);
}

double round_to(double x, DType t) {
  switch (t) {
    case DType::Float32:
      return static_cast<float>(x);
    case DType::Float16:
      return float_from_half(half_from_float(static_cast<float>(x)));
    case DType::BFloat16:
      return float_from_bfloat16(bfloat16_from_float(static_cast<float>(x)));
    default:
      return x;
  }
}

int64_t wrap(int64_t x, DType t) {
  switch (t) {
    case DType::Bool:
      return x != 0;
    case DType::UInt8:
      return static_cast<uint8_t>(x);
    case DType::Int8:
      return static_cast<int8_t>(x);
    case DType::Int16:
      return static_cast<int16_t>(x);
    case DType::Int32:
      return static_cast<int32_t>(x);
    default:
      return x;
  }
}

Scalar make(double f, DType t) {
  Scalar s;
  if (is_float(t)) {
    s.f = round_to(f, t);
  } else if (t == DType::Bool) {
    s.i = f != 0 || std::isnan(f);
  } else {
    s.i = integer_from_float(f, DType::Float64, t);  // an integer constant: exact in range
  }
  return s;
}

double as_double(const Scalar& s, DType t) {
  return is_float(t) ? s.f : static_cast<double>(s.i);
}

Scalar read(const void* base, DType t, int64_t index) {
  Scalar s;
  auto bytes = static_cast<const char*>(base) + index * ir::dtype_size(t);
  auto get = [&](auto sample) {
    std::memcpy(&sample, bytes, sizeof sample);
    return sample;
  };
  switch (t) {
    case DType::Float32:
      s.f = get(float{});
      break;
    case DType::Float64:
      s.f = get(double{});
      break;
    case DType::Float16:
      s.f = float_from_half(get(uint16_t{}));
      break;
    case DType::BFloat16:
      s.f = float_from_bfloat16(get(uint16_t{}));
      break;
    case DType::Bool:
      s.i = get(uint8_t{}) != 0;
      break;
    case DType::UInt8:
      s.i = get(uint8_t{});
      break;
    case DType::Int8:
      s.i = get(int8_t{});
      break;
    case DType::Int16:
      s.i = get(int16_t{});
      break;
    case DType::Int32:
      s.i = get(int32_t{});
      break;
    case DType::Int64:
      s.i = get(int64_t{});
      break;
    default:
      throw std::invalid_argument("interpreter: unsupported dtype");
  }
  return s;
}

void write(void* base, DType t, int64_t index, const Scalar& s) {
  auto bytes = static_cast<char*>(base) + index * ir::dtype_size(t);
  auto put = [&](auto sample) { std::memcpy(bytes, &sample, sizeof sample); };
  switch (t) {
    case DType::Float32:
      put(static_cast<float>(s.f));
      break;
    case DType::Float64:
      put(s.f);
      break;
    case DType::Float16:
      put(half_from_float(static_cast<float>(s.f)));
      break;
    case DType::BFloat16:
      put(bfloat16_from_float(static_cast<float>(s.f)));
      break;
    case DType::Bool:
      put(static_cast<uint8_t>(s.i != 0));
      break;
    case DType::UInt8:
      put(static_cast<uint8_t>(s.i));
      break;
    case DType::Int8:
      put(static_cast<int8_t>(s.i));
      break;
    case DType::Int16:
      put(static_cast<int16_t>(s.i));
      break;
    case DType::Int32:
      put(static_cast<int32_t>(s.i));
      break;
    case DType::Int64:
      put(s.i);
      break;
    default:
      throw std::invalid_argument("interpreter: unsupported dtype");
  }
}

double nan_max(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}
double nan_min(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
}

Scalar unary_float(Op op, double x, DType t) {
  switch (op) {
    case Op::Neg:
      return make(-x, t);
    case Op::Abs:
      return make(std::fabs(x), t);
    case Op::Exp:
      return make(std::exp(x), t);
    case Op::Log:
      return make(std::log(x), t);
    case Op::Sqrt:
      return make(std::sqrt(x), t);
    case Op::Rsqrt:
      return make(1.0 / std::sqrt(x), t);
    case Op::Reciprocal:
      return make(1.0 / x, t);
    case Op::Erf:
      return make(std::erf(x), t);
    case Op::Tanh:
      return make(std::tanh(x), t);
    case Op::Sigmoid:
      return make(1.0 / (1.0 + std::exp(-x)), t);
    case Op::Floor:
      return make(std::floor(x), t);
    case Op::Trunc:
      return make(std::trunc(x), t);
    default:
      throw std::invalid_argument(std::string("interpreter: bad float op ") + op_name(op));
  }
}

Scalar unary_int(Op op, int64_t x, DType t) {
  Scalar s;
  switch (op) {
    case Op::Neg:
      s.i = wrap(-x, t);
      break;
    case Op::Abs:
      s.i = wrap(x < 0 ? -x : x, t);
      break;
    case Op::Not:
      s.i = x == 0;
      break;
    case Op::Floor:
    case Op::Trunc:
      s.i = x;
      break;
    default:
      throw std::invalid_argument(std::string("interpreter: bad int op ") + op_name(op));
  }
  return s;
}

// One comparison for doubles and for int64 (comparing integers as doubles would round).
template <typename T>
bool compare(Op op, T a, T b) {
  switch (op) {
    case Op::Eq:
      return a == b;
    case Op::Ne:
      return a != b;
    case Op::Lt:
      return a < b;
    case Op::Le:
      return a <= b;
    case Op::Gt:
      return a > b;
    default:
      return a >= b;
  }
}

Scalar binary(Op op, const Scalar& a, const Scalar& b, DType arg_type, DType t) {
  Scalar s;
  if (is_comparison(op)) {
    s.i = is_float(arg_type) ? compare(op, a.f, b.f) : compare(op, a.i, b.i);
    return s;
  }
  if (is_float(t)) {
    switch (op) {
      case Op::Add:
        return make(a.f + b.f, t);
      case Op::Sub:
        return make(a.f - b.f, t);
      case Op::Mul:
        return make(a.f * b.f, t);
      case Op::Div:
        return make(a.f / b.f, t);
      case Op::Max:
        return make(nan_max(a.f, b.f), t);
      case Op::Min:
        return make(nan_min(a.f, b.f), t);
      default:
        break;
    }
  } else {
    // Wrapping arithmetic through unsigned, as two's-complement hardware does.
    const auto ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
    switch (op) {
      case Op::Add:
        s.i = wrap(static_cast<int64_t>(ua + ub), t);
        return s;
      case Op::Sub:
        s.i = wrap(static_cast<int64_t>(ua - ub), t);
        return s;
      case Op::Mul:
        s.i = wrap(static_cast<int64_t>(ua * ub), t);
        return s;
      case Op::Div:
        // x / -1 is a negation (wrapping: INT64_MIN / -1 overflows in C++).
        s.i = b.i == 0 ? 0 : b.i == -1 ? wrap(static_cast<int64_t>(0 - ua), t) : wrap(a.i / b.i, t);
        return s;
      case Op::Max:
        s.i = std::max(a.i, b.i);
        return s;
      case Op::Min:
        s.i = std::min(a.i, b.i);
        return s;
      case Op::And:
        s.i = a.i && b.i;
        return s;
      case Op::Or:
        s.i = a.i || b.i;
        return s;
      default:
        break;
    }
  }
  throw std::invalid_argument(std::string("interpreter: bad binary op ") + op_name(op));
}

class RowEvaluator {
 public:
  RowEvaluator(const Kernel& kernel, const std::vector<void*>& buffers)
      : kernel_(kernel),
        buffers_(buffers),
        element_(element_levels(kernel)),
        values_(kernel.exprs.size()) {}

  void run_row(const std::vector<int64_t>& row_index) {
    index_ = row_index;
    index_.resize(kernel_.rank(), 0);
    for (size_t i = 0; i < kernel_.exprs.size(); ++i) {
      if (element_[i]) continue;
      if (kernel_.exprs[i].op == Op::Reduce) {
        values_[i] = reduce(static_cast<int>(i));
      } else {
        values_[i] = eval(static_cast<int>(i));
      }
    }
    for (const Store& s : kernel_.stores) {
      if (!stores_per_element(kernel_, s)) write_store(s);
    }
    bool element_stores = false;
    for (const Store& s : kernel_.stores)
      element_stores = element_stores || stores_per_element(kernel_, s);
    if (!element_stores) return;
    for_each_element([&] {
      eval_elements(static_cast<int>(kernel_.exprs.size()));
      for (const Store& s : kernel_.stores) {
        if (stores_per_element(kernel_, s)) write_store(s);
      }
    });
  }

 private:
  template <typename F>
  void for_each_element(F body) {
    const int first = kernel_.row_rank();
    const int rank = kernel_.rank();
    if (kernel_.row_size() == 0) return;
    for (int d = first; d < rank; ++d)
      index_[d] = 0;
    while (true) {
      body();
      int d = rank - 1;
      while (d >= first && ++index_[d] == kernel_.sizes[d]) {
        index_[d] = 0;
        --d;
      }
      if (d < first) return;
    }
  }

  void eval_elements(int below) {
    for (int i = 0; i < below; ++i) {
      if (element_[i]) values_[i] = eval(i);
    }
  }

  Scalar reduce(int id) {
    const Expr& e = kernel_.exprs[id];
    const DType t = e.dtype;
    const int arg = e.args[0];
    double acc_f = 0;
    int64_t acc_i = 0;
    if (e.reduce == ReduceKind::Max) {
      acc_f = -INFINITY;
      acc_i = std::numeric_limits<int64_t>::min();
    } else if (e.reduce == ReduceKind::Min) {
      acc_f = INFINITY;
      acc_i = std::numeric_limits<int64_t>::max();
    }
    for_each_element([&] {
      eval_elements(id);
      const Scalar& v = values_[arg];
      switch (e.reduce) {
        case ReduceKind::Sum:
        case ReduceKind::Mean:
          acc_f += v.f;
          // Wrapping through unsigned, as the generated code's integer adds do.
          acc_i = static_cast<int64_t>(static_cast<uint64_t>(acc_i) + static_cast<uint64_t>(v.i));
          break;
        case ReduceKind::Max:
          acc_f = nan_max(acc_f, v.f);
          acc_i = std::max(acc_i, v.i);
          break;
        case ReduceKind::Min:
          acc_f = nan_min(acc_f, v.f);
          acc_i = std::min(acc_i, v.i);
          break;
      }
    });
    if (e.reduce == ReduceKind::Mean) {
      const double n = static_cast<double>(kernel_.row_size());
      return make(is_float(t) ? acc_f / n : static_cast<double>(acc_i) / n, t);
    }
    if (is_float(t)) return make(acc_f, t);
    Scalar s;
    s.i = wrap(acc_i, t);
    return s;
  }

  int64_t offset_of(const IndexMap& map) const {
    int64_t offset = map.offset;
    for (int d = 0; d < kernel_.rank(); ++d)
      offset += index_[d] * map.strides[d];
    return offset;
  }

  void write_store(const Store& s) {
    const DType out = kernel_.buffers[s.map.buffer].dtype;
    const DType in = kernel_.exprs[s.value].dtype;
    Scalar v = values_[s.value];
    if (in != out) v = make(as_double(v, in), out);
    write(buffers_[s.map.buffer], out, offset_of(s.map), v);
  }

  Scalar eval(int id) const {
    const Expr& e = kernel_.exprs[id];
    auto arg = [&](int k) -> const Scalar& { return values_[e.args[k]]; };
    auto arg_type = [&](int k) { return kernel_.exprs[e.args[k]].dtype; };
    switch (e.op) {
      case Op::Load: {
        const DType t = kernel_.buffers[e.map.buffer].dtype;
        return read(buffers_[e.map.buffer], t, offset_of(e.map));
      }
      case Op::Constant:
        return make(e.constant, e.dtype);
      case Op::Cast: {
        if (!is_float(arg_type(0)) && !is_float(e.dtype)) {
          Scalar s;
          s.i = wrap(arg(0).i, e.dtype);
          return s;
        }
        if (is_float(arg_type(0)) && e.dtype != DType::Bool && !is_float(e.dtype)) {
          Scalar s;
          s.i = integer_from_float(arg(0).f, arg_type(0), e.dtype);
          return s;
        }
        return make(as_double(arg(0), arg_type(0)), e.dtype);
      }
      case Op::Where:
        return arg(0).i ? arg(1) : arg(2);
      case Op::Reduce:
        return values_[id];
      default:
        break;
    }
    if (op_arity(e.op) == 1) {
      return is_float(e.dtype) ? unary_float(e.op, arg(0).f, e.dtype)
                               : unary_int(e.op, arg(0).i, e.dtype);
    }
    return binary(e.op, arg(0), arg(1), arg_type(0), e.dtype);
  }

  const Kernel& kernel_;
  const std::vector<void*>& buffers_;
  std::vector<bool> element_;
  std::vector<Scalar> values_;
  std::vector<int64_t> index_;
};

}  // namespace

void interpret(const Kernel& kernel, const std::vector<void*>& buffers) {
  validate(kernel);
  if (buffers.size() != kernel.buffers.size())
    throw std::invalid_argument("interpreter: one pointer per buffer expected");
  RowEvaluator evaluator(kernel, buffers);
  const int row_rank = kernel.row_rank();
  if (kernel.reduce_rank == 0) {
    // Every element is its own "row" of zero reduced dimensions.
    std::vector<int64_t> index(kernel.rank(), 0);
    for (int64_t d : kernel.sizes)
      if (d == 0) return;
    while (true) {
      evaluator.run_row(index);
      int d = kernel.rank() - 1;
      while (d >= 0 && ++index[d] == kernel.sizes[d]) {
        index[d] = 0;
        --d;
      }
      if (d < 0) return;
    }
  }
  std::vector<int64_t> row(row_rank, 0);
  for (int d = 0; d < row_rank; ++d)
    if (kernel.sizes[d] == 0) return;
  while (true) {
    evaluator.run_row(row);
    int d = row_rank - 1;
    while (d >= 0 && ++row[d] == kernel.sizes[d]) {
      row[d] = 0;
      --d;
    }
    if (d < 0) return;
  }
}

}  // namespace kiln::kernel
