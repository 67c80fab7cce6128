#pragma once

// kiln's own oneDNN max and average pools: the `onednn_pool` pass turns aten::max_pool2d and
// aten::avg_pool2d over a float32 or bf16 feature map into them, on a primitive made once per
// shape (runtime/onednn/pool_primitive.h).
//
// Registered with ATen's dispatcher as (CPU):
//   kiln::onednn_max_pool2d(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding,
//       int[2] dilation, bool ceil_mode) -> Tensor                    (and its .out overload)
//   kiln::onednn_avg_pool2d(Tensor input, int[2] kernel_size, int[2] stride, int[2] padding,
//       bool ceil_mode, bool count_include_pad) -> Tensor             (and its .out overload)
//
// The same arguments and result as aten::max_pool2d and aten::avg_pool2d (without
// divisor_override) for a 4-D input (stride given: the pass fills in an empty one as the kernel
// size). A channels-last input gives a channels-last output, any other layout a contiguous one.
// Where oneDNN would not give ATen's values, ATen's op runs inside: a max pool over NaNs (oneDNN
// skips them), an average counting the padding whose ceil_mode window reaches past it (oneDNN
// divides by the kernel's size). Built only with KILN_WITH_ONEDNN.

#include <ATen/core/Tensor.h>

namespace kiln {

at::Tensor& onednn_max_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel_size,
                                  at::IntArrayRef stride, at::IntArrayRef padding,
                                  at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out);
at::Tensor& onednn_avg_pool2d_out(const at::Tensor& input, at::IntArrayRef kernel_size,
                                  at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                                  bool count_include_pad, at::Tensor& out);

}  // namespace kiln
