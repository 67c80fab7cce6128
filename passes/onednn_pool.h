// kiln's own oneDNN pools (CPU, float32 or bf16): aten::max_pool2d over a 4-D feature map runs
// as kiln::onednn_max_pool2d (runtime/onednn_pool.h), on a oneDNN primitive made once per shape.
// ATen's channels-last max_pool2d took 0.53 ms for ResNet's 1x64x112x112 3x3 stride-2 pool on 2
// threads with AVX-512 (its NCHW one 6.4 ms), oneDNN's 0.1 ms or less (docs/passes.md).
//
//   %y = aten::max_pool2d(%x) {kernel_size=[3,3], stride=[2,2], padding=[1,1], dilation=[1,1],
//                              ceil_mode=false}
// becomes
//   %y = kiln::onednn_max_pool2d(%x) {kernel_size=[3,3], stride=[2,2], padding=[1,1],
//                                     dilation=[1,1], ceil_mode=false}
//
// aten::avg_pool2d (count_include_pad either way, no divisor_override) becomes
// kiln::onednn_avg_pool2d the same way {kernel_size, stride, padding, ceil_mode,
// count_include_pad}: PoolFormer's 1x64x56x56 3x3 stride-1 pool took ATen 0.096 ms channels-last
// (0.88 ms NCHW), oneDNN 0.032 ms (2 threads, AVX-512).
//
// A one-value list stands for both dimensions, an empty stride for the kernel size, as in
// PyTorch; the rewritten node spells out two. Runs where the runtime registered the op
// (PipelineOptions::own_onednn); KILN_DISABLE=onednn_pool keeps ATen's.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of pools rewritten.
int onednn_pool(ir::Graph& graph);

}  // namespace kiln
