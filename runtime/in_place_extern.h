// Extern steps that write their output over an input that dies there.
//
// Some ATen ops copy one input into their output before computing: oneDNN's convolution with a
// residual add (`mkldnn::_convolution_pointwise.binary`) copies `other`, then accumulates the
// convolution into it. ATen's in-place overload of such an op (`mkldnn::_convolution_pointwise_
// .binary`, the same arguments with the written one marked `Tensor(a!)`) works on that input
// directly. A step may use it when, in the graph, the input
//   - is an intermediate whose last reader is this step (not a graph input, output or constant),
//   - is not in the arena (the output would outlive the input's planned bytes),
//   - has the output's exact type (sizes, strides, dtype), and is passed only once;
// and, checked on every call because ops may return views or their own inputs, its tensor and
// storage have no other owner and it needs no gradient. Otherwise the functional op runs.
//
//   %y = mkldnn::_convolution_pointwise.binary(%x, %identity, %w) {binary_attr="add", ...}
//   (%identity dies here)  ->  runs as _convolution_pointwise_.binary(%identity, %x, %w, ...)
//
// In ResNet-18 at batch 8 this saves the 8 copies (3.4 ms of 137 ms) that the functional form
// makes of the residual.
#pragma once

#include "passes/ir/graph.h"
#include "passes/plan_memory.h"
#include "runtime/plan.h"

namespace kiln {

/// The in-place overload of `functional` (named with a trailing '_', same overload name, the
/// same arguments in any order with exactly one written, returning it), if ATen has one.
std::optional<ExternStep::InPlace> find_in_place_overload(const c10::OperatorHandle& functional);

/// Gives every extern step of `plan` (built from `graph` and `memory`, releases set) whose op
/// has an in-place overload and whose written input qualifies as above its ExternStep::in_place.
void choose_in_place_externs(Plan& plan, const ir::Graph& graph, const MemoryPlan& memory);

/// Whether the executor may write over `input` at run time: no other tensor or storage owner,
/// no gradient.
bool is_sole_owner(const at::Tensor& input);

}  // namespace kiln
