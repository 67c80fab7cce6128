// Builds a Plan from a graph that went through the pass pipeline.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "passes/ir/graph.h"
#include "passes/plan_memory.h"
#include "runtime/plan.h"

namespace kiln {

/// True when the runtime can make this node write its output into a given buffer: it has one
/// output, the op table allows it, and ATen has an out= variant with the same arguments.
bool can_write_into_buffer(const ir::Node& node);

/// `constants[i]` is the tensor of `prim::Constant {index=i}`. `device` holds the arena.
/// `kernels` and `code` (which keeps them alive) serve the graph's kiln::fused nodes: the one
/// whose attribute `kernel` is i runs kernels[i].
/// Throws kiln::Error (unsupported) for an operator the dispatcher does not know.
Plan build_plan(const ir::Graph& graph, const std::vector<at::Tensor>& constants,
                const MemoryPlan& memory, c10::Device device,
                const std::vector<CompiledKernel>& kernels = {}, std::shared_ptr<void> code = {});

}  // namespace kiln
