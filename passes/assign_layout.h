// Layout assignment (CPU): convolutional regions run channels-last (NHWC; NDHWC around 3-D
// convolutions, the same in every respect below).
//
// oneDNN runs a convolution on a channels-last input without reordering the activations, and
// ATen's channels-last max pooling is vectorized over channels (on ResNet-18's first pool, 20x
// faster than the NCHW kernel). So the input of every convolution is converted to channels-last
// once, and the layout then flows on: each node whose input changed gets the output types ATen
// gives it for the new inputs (`infer`, the runtime's, runs it). Elementwise ops, pooling,
// convolutions and fused kernels keep channels-last, so conversions appear only where the region
// meets something else:
//
//   graph(%x : f32[1,3,8,8]):
//     %w1, %w2 : frozen weights (prim::Constant)
//     %y : f32[1,4,8,8] = aten::conv2d(%x, %w1) {...}
//     %r : f32[1,4,8,8] = aten::relu(%y)
//     %z : f32[1,4,8,8] = aten::conv2d(%r, %w2) {...}
//     return (%z)
// becomes
//     %x_nhwc : f32[1,3,8,8]{192,1,24,3} = aten::_to_copy(%x) {memory_format=2, ...}
//     %w1_nhwc = aten::_to_copy(%w1) {memory_format=2, ...}     (folded at compile time)
//     %y : f32[1,4,8,8]{256,1,32,4} = aten::conv2d(%x_nhwc, %w1_nhwc) {...}
//     %r : f32[1,4,8,8]{256,1,32,4} = aten::relu(%y)
//     %z : f32[1,4,8,8]{256,1,32,4} = aten::conv2d(%r, %w2_nhwc) {...}
//     %z_contiguous : f32[1,4,8,8] = aten::_to_copy(%z) {memory_format=0, ...}
//     return (%z_contiguous)
//
// Weights. A frozen weight (a constant, or computed from constants, as after batch-norm folding)
// gets a channels-last copy that fold_constants computes once. Where a weight is a graph input
// (a torch.compile training graph), oneDNN would reorder it on every call and the activations
// the graph returns for the backward would each be converted back: there convolutions keep
// their layout, and only max pooling runs channels-last, converted in and out around it.
// One convolution is enough to run channels-last: kiln's oneDNN convolution reads the image in
// its own layout and packs the weight once (ATen's reorders it on every call), which pays for a
// copy of its output where one is needed.
//
// Graph outputs keep the layout they had (a caller may view them), and so do the inputs of ops
// outside the op table (they may assume their input's strides) and of as_strided. A value changes
// layout only where a copy can give its old one back: a contiguous copy, or for a permuted dense
// layout (a transposed token stream) permute, contiguous copy, permute back. Values are the same
// as before; only strides change.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

/// The output types `node` has when its inputs have `inputs` types, or nullopt when the runtime
/// cannot run it on them (a view that needs other strides).
using TypeInferrer = std::function<std::optional<std::vector<ir::TensorType>>(
    const ir::Node& node, const std::vector<ir::TensorType>& inputs)>;

/// c10::MemoryFormat's values, as `_to_copy`'s memory_format attribute holds them.
inline constexpr int64_t kContiguousFormat = 0;
inline constexpr int64_t kChannelsLastFormat = 2;
inline constexpr int64_t kChannelsLast3dFormat = 3;

/// The channels-last memory format of a tensor of this rank: channels_last for 4-D (NHWC),
/// channels_last_3d for 5-D (NDHWC).
inline int64_t channels_last_format(size_t rank) {
  return rank == 5 ? kChannelsLast3dFormat : kChannelsLastFormat;
}

/// Returns the number of layout conversions that run on every call (weights converted at compile
/// time are not counted; 0 when the graph is left as it was).
int assign_layout(ir::Graph& graph, const TypeInferrer& infer);

/// Strides of a dense channels-last tensor of these 4-D (NHWC) or 5-D (NDHWC) sizes.
std::vector<int64_t> channels_last_strides(const std::vector<int64_t>& sizes);

}  // namespace kiln
