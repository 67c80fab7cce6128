#pragma once

// kiln's own oneDNN max pool: the `onednn_pool` pass turns aten::max_pool2d over a float32 or bf16
// feature map into it, on a primitive made once per shape (runtime/onednn/pool_primitive.h).
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_max_pool2d(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding,
//       int[2] dilation, bool ceil_mode) -> Tensor                    (and its .out overload)
//
// The same arguments and result as aten::max_pool2d for a 4-D input (stride given: the pass
// fills in an empty one as the kernel size). A channels-last input gives a channels-last
// output, any other layout a contiguous one. Built only with KILN_WITH_ONEDNN.

#include <ATen/core/Tensor.h>

namespace kiln {

at::Tensor& onednn_max_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel_size,
                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out);

}  // namespace kiln
