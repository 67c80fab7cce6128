// Labels for plan steps (plan.h's StepLabel): what class of work a node does, and for a fused
// node the ops in its kernel. Made once when the plan is built, so the profiler costs nothing
// to name a step.
#pragma once

#include "passes/ir/graph.h"
#include "runtime/plan.h"

namespace kiln {

/// The label of an extern step running `node`.
StepLabel label_extern_node(const ir::Node& node);
/// The label of the kernel generated for the fused node `node`: its members, in order, and the
/// heaviest class among them (a kernel that only converts layouts is `layout`).
StepLabel label_fused_node(const ir::Node& node);

}  // namespace kiln
