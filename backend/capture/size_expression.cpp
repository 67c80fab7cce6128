#include "backend/capture/size_expression.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/error.h"

namespace kiln {
namespace {

[[noreturn]] void overflow(const char* what) {
  throw Error(ErrorKind::Unsupported,
              std::string("a symbolic size overflows int64 in its ") + what);
}

int64_t apply(SizeExpression::Op op, int64_t x, int64_t y) {
  using Op = SizeExpression::Op;
  int64_t result = 0;
  switch (op) {
    case Op::kAdd:
      if (__builtin_add_overflow(x, y, &result)) overflow("sum");
      return result;
    case Op::kMul:
      if (__builtin_mul_overflow(x, y, &result)) overflow("product");
      return result;
    case Op::kFloorDiv:
    case Op::kMod: {
      if (y == 0) throw Error(ErrorKind::Unsupported, "a symbolic size divides by zero");
      if (x == INT64_MIN && y == -1) overflow("quotient");
      int64_t quotient = x / y, remainder = x % y;
      if (remainder != 0 && ((remainder < 0) != (y < 0))) {  // C++ truncates; Python floors
        quotient -= 1;
        remainder += y;
      }
      return op == Op::kFloorDiv ? quotient : remainder;
    }
    case Op::kMax:
      return std::max(x, y);
    case Op::kMin:
      return std::min(x, y);
    default:
      throw Error(ErrorKind::Internal, "not a binary size operation");
  }
}

}  // namespace

SizeExpression::SizeExpression(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
  int64_t depth = 0;
  for (const Token& token : tokens_) {
    depth += token.op == Op::kConst || token.op == Op::kDim ? 1 : -1;
    if (depth < 1) throw Error(ErrorKind::Internal, "a size expression pops an empty stack");
  }
  if (depth != 1) {
    throw Error(ErrorKind::Internal,
                "a size expression leaves " + std::to_string(depth) + " values, not one");
  }
}

SizeExpression::Op SizeExpression::op_named(const std::string& name) {
  static const std::unordered_map<std::string, Op> ops = {
      {"const", Op::kConst},       {"dim", Op::kDim}, {"add", Op::kAdd}, {"mul", Op::kMul},
      {"floordiv", Op::kFloorDiv}, {"mod", Op::kMod}, {"max", Op::kMax}, {"min", Op::kMin}};
  auto it = ops.find(name);
  if (it == ops.end()) throw Error(ErrorKind::Internal, "no size operation '" + name + "'");
  return it->second;
}

int64_t SizeExpression::evaluate(
    const std::function<int64_t(int64_t ref, int64_t dim)>& size) const {
  std::vector<int64_t> stack;
  for (const Token& token : tokens_) {
    if (token.op == Op::kConst) {
      stack.push_back(token.a);
    } else if (token.op == Op::kDim) {
      stack.push_back(size(token.a, token.b));
    } else {  // the constructor checked that two values are there
      const int64_t y = stack.back();
      stack.pop_back();
      stack.back() = apply(token.op, stack.back(), y);
    }
  }
  return stack.back();
}

}  // namespace kiln
