// An integer computed from the sizes of graph values when a region is imported for concrete
// inputs: a symbolic size of a torch.compile graph (s0 * s1, say) that an op takes as an argument.
// The FX frontend writes it as a postfix program over the sizes of the region's own values
// (kiln/_sizes.py); a region is imported per concrete input signature, so at import every such
// size is a number and the op is imported with it as a constant.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "passes/base/export.h"

namespace kiln {

class KILN_INTERNAL SizeExpression {
 public:
  enum class Op { kConst, kDim, kAdd, kMul, kFloorDiv, kMod, kMax, kMin };
  struct Token {
    Op op;
    int64_t a = 0;  // kConst: the value; kDim: the graph value's reference
    int64_t b = 0;  // kDim: the dimension
  };

  /// Throws kiln::Error (internal) unless the program, run, leaves exactly one value.
  explicit SizeExpression(std::vector<Token> tokens);
  /// "const", "dim", "add", "mul", "floordiv", "mod", "max", "min"; throws kiln::Error (internal)
  /// for another name.
  static Op op_named(const std::string& name);

  /// Its value, `size(ref, dim)` giving the size of a graph value's dimension. floordiv and mod
  /// round towards negative infinity, as Python's // and % (and sympy's FloorDiv) do. Throws
  /// kiln::Error (unsupported) on a division by zero or an overflow.
  int64_t evaluate(const std::function<int64_t(int64_t ref, int64_t dim)>& size) const;
  const std::vector<Token>& tokens() const { return tokens_; }

 private:
  std::vector<Token> tokens_;
};

}  // namespace kiln
