// kiln's own oneDNN max pool (CPU, float32 or bf16): aten::max_pool2d over a 4-D feature map runs
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
// A one-value list stands for both dimensions, an empty stride for the kernel size, as in
// PyTorch; the rewritten node spells out two. Runs where the runtime registered the op
// (PipelineOptions::own_onednn); KILN_DISABLE=onednn_pool keeps ATen's.
#pragma once

#include "passes/ir/graph.h"

namespace kiln {

/// Returns the number of max pools rewritten.
int onednn_pool(ir::Graph& graph);

}  // namespace kiln
