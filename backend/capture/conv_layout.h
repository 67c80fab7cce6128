// The memory format ATen's convolutions (and group norm) give their outputs. Their meta kernels
// return contiguous tensors, while the kernels that run (oneDNN and the slow 2-d path on the CPU,
// cuDNN on CUDA) return channels-last ones when the input or the weight is channels last;
// FakeTensor, and so every torch.compile graph, follows the kernels. An importer that trusted the
// meta kernel would type the output other than the graph it imports was traced with (a `view` after
// it then fails) and than the tensor the convolution returns at run time (which the plan would then
// copy).
#pragma once

#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <string>

namespace kiln {

/// After a meta run of `op` ("aten::convolution", "aten::_convolution",
/// "aten::convolution_backward"; others are left
/// alone) on `inputs`, gives `outputs` (meta tensors) the memory format the kernel on `device`
/// would return: the one ATen's backend selection picks for the input and weight. Where that
/// selection fails (a device whose runtime is not loaded), the outputs are left as they are.
void match_conv_layout(const std::string& op, const torch::jit::Stack& inputs,
                       torch::jit::Stack& outputs, c10::Device device);

/// The same for "aten::group_norm" (others are left alone): on the CPU ATen runs it on its input
/// in the input's suggested memory format and returns that format, while its meta run (as on any
/// device but the CPU) makes the input contiguous first and returns a contiguous tensor.
void match_group_norm_layout(const std::string& op, const torch::jit::Stack& inputs,
                             torch::jit::Stack& outputs, c10::Device device);

}  // namespace kiln
