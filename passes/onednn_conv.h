// kiln's own oneDNN convolutions (CPU, float32, channels-last): the oneDNN convolutions that
// prepack_conv made and winograd_conv left run as kiln::onednn_conv2d (runtime/onednn_conv.h;
// kiln::onednn_conv3d and kiln::onednn_conv3d_weight for 3-D ones, in every respect the same),
// whose oneDNN primitive is created once per shape instead of on every call. ATen's
// `mkldnn::_convolution_pointwise` spends ~25 us a call creating it: measured on 2 threads, a
// 120->32-channel 1x1 convolution of one pixel (a squeeze-excitation gate) took 30 us through
// ATen and 2.2 us on a kept primitive, a 184-channel 14x14 depthwise one 36 us and 8 us;
// MobileNetV3-Large has 62 convolutions.
//
//   %w_mkldnn = aten::to_mkldnn(%w) {dtype=None}
//   %w_packed = aten::mkldnn_reorder_conv2d_weight(%w_mkldnn) {..., input_size=[1,72,56,56]}
//   %y = mkldnn::_convolution_pointwise(%x, %w_packed, %b) {padding, stride, dilation, groups,
//                                        attr="relu", scalars=[], algorithm=""}
// becomes
//   %w_onednn : f32[...] = kiln::onednn_conv2d_weight(%w) {input_size=[1,72,56,56], stride,
//                            padding, dilation, groups, bias=true, residual=false,
//                            activation="relu", scalars=[]}                          (folded)
//   %y = kiln::onednn_conv2d(%x, %w, %w_onednn, %b) {other=None, stride, padding, dilation,
//                             groups, activation="relu", scalars=[]}
//
// A SiLU, sigmoid, hardswish or hardsigmoid that alone reads the result, whole or as
// torch.compile decomposes it (x * sigmoid(x); x * clamp(clamp(x + 3, 0), max=6) / 6), becomes
// its post-op too: `activation="silu"`, "sigmoid", "hardswish", "hardsigmoid".
// `_convolution_pointwise.binary`'s residual operand becomes `other`, added by a oneDNN binary
// post-op that reads it where it lies (ATen's binary form copies it into the output first). The
// dense %w stays: the weight is packed again where the thread count changed oneDNN's layout.
// Runs where the runtime registered kiln::onednn_conv2d (PipelineOptions::own_onednn);
// KILN_DISABLE=onednn_conv keeps ATen's op.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "passes/ir/graph.h"

namespace kiln {

/// Under precision=bf16 a convolution multiplies in bf16 where it has at least
/// kMinBf16ChannelsPerGroup input channels a group, or where each input value meets at least
/// kMinBf16UsesPerInput weights (K / groups * kh * kw / stride area: ResNet's 3-channel 7x7
/// stem, ConvNeXt's and a ViT's patches); the others (depthwise, narrow groups, MobileNet's 3x3
/// stride-2 stem) stay float32.
inline constexpr int64_t kMinBf16ChannelsPerGroup = 16;
inline constexpr int64_t kMinBf16UsesPerInput = 96;

/// Returns the number of convolutions rewritten. `bf16`: both nodes of each convolution that pays
/// for it (above) get {precision="bf16"}: the weight is packed in bf16 and the convolution
/// multiplies in bf16, summing in float32 (the compile option precision=bf16).
int onednn_conv(ir::Graph& graph, bool bf16 = false);

/// Whether `node` is kiln::onednn_conv2d or kiln::onednn_conv3d (a 3-D convolution, rewritten
/// the same way from NDHWC inputs).
bool is_onednn_conv(const ir::Node& node);

/// The index among a `kiln::onednn_conv2d`'s (or `_conv3d`'s) inputs of its residual `other`
/// (inputs x, weight, packed[, bias][, other]; an absent one is the attribute None), or nullopt
/// where it has none.
std::optional<size_t> conv_residual_input(const ir::Node& conv);

/// Where a convolution's residual dies at it and has the output's exact type (sizes, strides,
/// dtype), plan_memory may place the output over it: the runtime then adds the convolution into
/// the residual where it lies (oneDNN's sum post-op) instead of reading it beside the output
/// (a binary post-op), one buffer and one stream of bytes fewer. As (input, output) pairs.
std::vector<std::pair<int, int>> conv_in_place_candidates(const ir::Node& conv);

}  // namespace kiln
