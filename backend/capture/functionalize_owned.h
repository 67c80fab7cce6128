// In-place ops on memory nothing else will read, made functional (TorchScript graphs, after
// TorchScript's own RemoveTensorMutation). That pass leaves an in-place op wherever its result
// is written again or has views (it will not change an aliasing relationship it cannot prove
// safe), so these stay in place and in the interpreter, each splitting the region around it
// (and costing a layout conversion on both sides between convolutions):
//
//   %cat = aten::cat(%parts, 1)
//   %x = aten::slice(%cat, 1, 0, 16)          GhostNet: an add into a slice of a fresh cat
//   %y = aten::add_(%x, %shortcut, 1)
//
//   %s = aten::add_(%conv, %shortcut, 1)        SKNet: a residual whose relu_'s result the
//   %r = aten::relu_(%s)                        next block splits (views)
//   %a, %b = aten::split(%r, 32, 1)
//
//   %m = aten::new_zeros(%x, [H, W])           Swin: a mask written a block at a time, then
//   %r = aten::slice(%m, 0, 0, -7)             read (`mask[h0:h1, w0:w1] = count`)
//   %b = aten::slice(%r, 1, 0, -7)
//   %f = aten::fill_(%b, %count)
//   ... aten::view(%m, ...)
//
// An op `y = op_(v, ...)` is rewritten when the memory it writes is owned by the graph at that
// point: every value that may alias or contain an alias of `v` (its base, other views of the
// base, lists holding them) is made by an op of the graph (not an input, a constant or a module
// attribute), and after the op nothing reads them but `y` and the base `v` was cut from by
// slices and selects. `op_` becomes `op` on `v`, written back into the base through each view
// by `slice_scatter`/`select_scatter`; what reads `y` afterwards reads the functional result,
// what reads the base reads the scattered one. The first example becomes `aten::add(%x, ...)`
// (its scatter into %cat is dead), the third `aten::fill(%b, %count)` and two scatters that
// the view reads. Where both `y` and the base are read afterwards the op stays: the result
// would be a tensor of its own, which a later write could not carry to the base's readers.
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
/// rewritten, and only the ops listed in functionalize_owned.cpp (elementwise ones, fill_,
/// zero_, copy_, index_put_).
int functionalize_owned(const std::shared_ptr<torch::jit::Graph>& graph);

}  // namespace kiln
