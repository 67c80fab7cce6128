// The Executor: runs a Plan on real tensors. The only place that touches real memory.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include "runtime/bounds_check.h"
#include "runtime/plan.h"

namespace kiln {

/// Runs `plan` on `inputs` (one per graph input, already checked against the plan's signature).
/// Outputs are fresh tensors owned by the caller, except where the graph returns an input or a
/// constant unchanged (as eager would). Safe to call from several threads on the same plan.
/// `check_bounds`: a checked run (runtime/bounds_check.h), slower; by default when
/// KILN_DEBUG=bounds.
std::vector<at::Tensor> run_plan(const Plan& plan, const std::vector<at::Tensor>& inputs,
                                 bool check_bounds = bounds_checked());

}  // namespace kiln
