// In-place elementwise ops on memory nothing else will read, made functional (TorchScript graphs,
// after TorchScript's own RemoveTensorMutation). That pass leaves an in-place op wherever its
// result is written again or has views (it will not change an aliasing relationship it cannot
// prove safe), so two patterns stay in-place and in the interpreter, each splitting the region
// around it and costing a layout conversion on both sides:
//
//   %cat = aten::cat(%parts, 1)
//   %x = aten::slice(%cat, 1, 0, 16)          GhostNet: an add into a slice of a fresh cat
//   %y = aten::add_(%x, %shortcut, 1)
//
//   %s = aten::add_(%conv, %shortcut, 1)        SKNet: a residual whose relu_'s result the
//   %r = aten::relu_(%s)                        next block splits (views)
//   %a, %b = aten::split(%r, 32, 1)
//
// becomes `aten::add(%x, %shortcut, 1)`, `aten::relu(%s)`. An op `y = op_(v, ...)` is rewritten
// when the memory it writes is owned by the graph at that point: every value that may alias or
// contain an alias of `v` (its base, other views of the base, lists holding them) is made by an
// op of the graph (not an input, a constant or a module attribute) and read by nothing after it;
// what reads `y` afterwards reads the functional result instead. The memory the op would have
// written is then never read again, so writing it or a new tensor are the same to the program.
// A binary op whose other operand is a tensor gets `aten::type_as(result, v)` after it: in place
// the result keeps `v`'s dtype, where the functional op would promote (a same-dtype cast is
// removed later by canonicalize).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace kiln {

/// Whether the functional form of in-place `n` may compute another dtype: arithmetic (add_,
/// sub_, mul_, div_) with a tensor operand, which in place keeps its input's dtype where the
/// functional op promotes (float32 += float64 stays float32). TorchScript's RemoveTensorMutation
/// rewrites those without a cast when dtypes are unknown (as in a traced, frozen graph): capture
/// keeps them from it and leaves them to functionalize_owned.
bool promotes_when_functional(const torch::jit::Node& n);

/// Returns the number of in-place ops made functional. Only the graph's top-level block is
/// rewritten, and only the elementwise ops listed in functionalize_owned.cpp.
int functionalize_owned(const std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace kiln
