// A plan of one hand-written kernel step, out = f(x) over `n` floats, for the executor's tests: the
// kernel stands in for generated code (what it does wrong or right is the test's choice), and the
// output is a graph output (not planned).
#pragma once

#include <string>

#include "runtime/plan.h"

namespace kiln::testing {

inline Plan one_kernel_plan(KernelFunction function, int64_t n, int64_t grain,
                            const std::string& name) {
  const ir::TensorType type = ir::make_contiguous(ir::DType::Float32, {n});
  KernelStep step;
  step.name = name;
  step.kernel.function = function;
  step.kernel.range = n;
  step.kernel.grain = grain;
  step.inputs = {0};
  step.input_offsets = {-1};
  step.input_types = {type};
  step.outputs = {1};
  step.output_offsets = {-1};
  step.output_types = {type};
  Plan plan;
  plan.num_values = 2;
  plan.inputs = {0};
  plan.outputs = {1};
  plan.steps.push_back(step);
  return plan;
}

}  // namespace kiln::testing
