// The memory format ATen's CPU convolutions give their outputs. Their meta kernels return
// contiguous tensors, while the kernels that run (oneDNN, the slow 2-d path) return channels-last
// ones when the input or the weight is channels last; FakeTensor, and so every torch.compile
// graph, follows the kernels. An importer that trusted the meta kernel would type the output
// other than the graph it imports was traced with (a `view` after it then fails) and than the
// tensor the convolution returns at run time (which the plan would then copy).
#pragma once

#include <ATen/core/stack.h>

#include <string>

namespace kiln {

/// After a meta run of `op` ("aten::convolution", "aten::convolution_backward"; others are left
/// alone) on `inputs`, gives `outputs` (meta tensors) the memory format the CPU kernel would
/// return: the one ATen's backend selection picks for the input and weight.
void match_cpu_conv_layout(const std::string& op, const torch::jit::Stack& inputs,
                           torch::jit::Stack& outputs);

}  // namespace kiln
