#include "passes/ir/op_table.h"

#include <algorithm>
#include <array>

namespace kiln::ir {
namespace {

constexpr int kAny = -1;
constexpr bool kPlanned = true;  // has an out= variant the runtime may write into a planned buffer
constexpr bool kOwn = false;     // the op allocates its own output

using K = OpKind;

// Unary and binary pointwise ops share their shape: one entry per ATen overload.
constexpr OpInfo kOps[] = {
    {"prim::Constant", K::Constant, 0, 0, 1, kOwn},
    // Arithmetic with scalars and alpha.
    {"aten::add.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::add.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::sub.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::sub.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::rsub.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::rsub.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::mul.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::mul.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::div.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::div.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::div.Tensor_mode", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::neg", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::abs", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::exp", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::log", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::sqrt", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::rsqrt", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::pow.Tensor_Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::pow.Tensor_Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::pow.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::erf", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::log1p", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::expm1", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::reciprocal", K::Elementwise, 1, 1, 1, kPlanned},
    // Activations.
    {"aten::tanh", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::sigmoid", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::relu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::gelu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::silu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::clamp", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::clamp.Tensor", K::Elementwise, 1, 3, 1, kPlanned},
    {"aten::clamp_min", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::clamp_max", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::hardtanh", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::hardswish", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::hardsigmoid", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::leaky_relu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::elu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::selu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::celu", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::softplus", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::mish", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::sign", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::maximum", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::minimum", K::Elementwise, 2, 2, 1, kPlanned},
    // Selection and comparisons.
    {"aten::where.self", K::Elementwise, 3, 3, 1, kPlanned},
    {"aten::where.ScalarSelf", K::Elementwise, 2, 2, 1, kOwn},
    {"aten::where.ScalarOther", K::Elementwise, 2, 2, 1, kOwn},
    {"aten::where.Scalar", K::Elementwise, 1, 1, 1, kOwn},
    {"aten::eq.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::eq.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::ne.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::ne.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::lt.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::lt.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::le.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::le.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::gt.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::gt.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    {"aten::ge.Tensor", K::Elementwise, 2, 2, 1, kPlanned},
    {"aten::ge.Scalar", K::Elementwise, 1, 1, 1, kPlanned},
    // Casts. to.* may return its input unchanged, so it is treated as a possible alias.
    {"aten::_to_copy", K::Copy, 1, 1, 1, kOwn},
    {"aten::to.dtype", K::View, 1, 1, 1, kOwn},
    {"aten::to.dtype_layout", K::View, 1, 1, 1, kOwn},
    {"aten::to.device", K::View, 1, 1, 1, kOwn},
    {"aten::to.other", K::View, 2, 2, 1, kOwn},
    {"aten::type_as", K::View, 2, 2, 1, kOwn},
    // Reductions.
    {"aten::sum", K::Reduction, 1, 1, 1, kOwn},
    {"aten::sum.dim_IntList", K::Reduction, 1, 1, 1, kPlanned},
    {"aten::mean", K::Reduction, 1, 1, 1, kOwn},
    {"aten::mean.dim", K::Reduction, 1, 1, 1, kPlanned},
    {"aten::amax", K::Reduction, 1, 1, 1, kPlanned},
    {"aten::amin", K::Reduction, 1, 1, 1, kPlanned},
    // Variance and standard deviation: every overload TorchScript and FX name (unbiased, dim,
    // correction). kOwn: their out= variants are not the ones the runtime knows how to call.
    {"aten::var", K::Reduction, 1, 1, 1, kOwn},
    {"aten::var.dim", K::Reduction, 1, 1, 1, kOwn},
    {"aten::var.correction", K::Reduction, 1, 1, 1, kOwn},
    {"aten::std", K::Reduction, 1, 1, 1, kOwn},
    {"aten::std.dim", K::Reduction, 1, 1, 1, kOwn},
    {"aten::std.correction", K::Reduction, 1, 1, 1, kOwn},
    // Normalizations.
    {"aten::softmax.int", K::Normalization, 1, 1, 1, kPlanned},
    {"aten::_softmax", K::Normalization, 1, 1, 1, kPlanned},
    {"aten::log_softmax.int", K::Normalization, 1, 1, 1, kPlanned},
    {"aten::_log_softmax", K::Normalization, 1, 1, 1, kPlanned},
    {"aten::layer_norm", K::Normalization, 1, 3, 1, kOwn},
    {"aten::batch_norm", K::Normalization, 1, 5, 1, kOwn},
    // Matrix products and convolutions: run through ATen (or oneDNN after prepacking); their
    // elementwise consumers fuse into an epilogue kernel (fuse_epilogue).
    {"aten::linear", K::Gemm, 2, 3, 1, kPlanned},
    {"aten::matmul", K::Gemm, 2, 2, 1, kPlanned},
    {"aten::mm", K::Gemm, 2, 2, 1, kPlanned},
    {"aten::bmm", K::Gemm, 2, 2, 1, kPlanned},
    {"aten::addmm", K::Gemm, 3, 3, 1, kPlanned},
    // prepack_linear's and prepack_conv's: oneDNN's matmul and convolution, and their weights
    // reordered at compile time (tensors in oneDNN's opaque layout).
    {"mkldnn::_linear_pointwise", K::Gemm, 2, 3, 1, kOwn},
    {"mkldnn::_reorder_linear_weight", K::Copy, 1, 1, 1, kOwn},
    {"mkldnn::_convolution_pointwise", K::Convolution, 2, 3, 1, kOwn},
    {"mkldnn::_convolution_pointwise.binary", K::Convolution, 3, 4, 1, kOwn},
    {"aten::to_mkldnn", K::Copy, 1, 1, 1, kOwn},
    {"aten::mkldnn_reorder_conv2d_weight", K::Copy, 1, 1, 1, kOwn},
    {"aten::mkldnn_reorder_conv3d_weight", K::Copy, 1, 1, 1, kOwn},
    // winograd_conv's: kiln's own ops (runtime/winograd_conv.h), registered with the dispatcher.
    // Its results are fresh tensors, not planned buffers, so a oneDNN convolution that adds one
    // as its residual can still write over it in place (runtime/in_place_extern.h).
    {"kiln::winograd_weight", K::Copy, 1, 1, 1, kOwn},
    {"kiln::winograd_conv2d", K::Convolution, 3, 5, 1, kOwn},
    // onednn_conv's and prepack_linear's: kiln's own oneDNN primitives (runtime/onednn_conv.h,
    // runtime/onednn_linear.h, runtime/onednn_matmul.h), written into planned buffers.
    {"kiln::onednn_conv2d_weight", K::Copy, 1, 1, 1, kOwn},
    {"kiln::onednn_conv2d", K::Convolution, 3, 5, 1, kPlanned},
    {"kiln::onednn_conv3d_weight", K::Copy, 1, 1, 1, kOwn},
    {"kiln::onednn_conv3d", K::Convolution, 3, 5, 1, kPlanned},
    {"kiln::onednn_linear_weight", K::Copy, 1, 1, 1, kOwn},
    {"kiln::onednn_linear", K::Gemm, 3, 4, 1, kPlanned},
    {"kiln::onednn_matmul", K::Gemm, 2, 3, 1, kPlanned},
    {"kiln::onednn_max_pool2d", K::Pooling, 1, 1, 1, kPlanned},
    {"kiln::onednn_avg_pool2d", K::Pooling, 1, 1, 1, kPlanned},
    {"aten::conv2d", K::Convolution, 2, 3, 1, kOwn},
    {"aten::conv3d", K::Convolution, 2, 3, 1, kOwn},
    {"aten::mkldnn_convolution", K::Convolution, 2, 3, 1, kOwn},  // assign_layout's
    {"aten::convolution", K::Convolution, 2, 3, 1, kOwn},
    {"aten::_convolution", K::Convolution, 2, 3, 1, kOwn},  // what tracing records
    {"aten::max_pool2d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::avg_pool2d", K::Pooling, 1, 1, 1, kOwn},
    // Video models' pools: ATen runs them channels-last (NDHWC) as well.
    {"aten::max_pool3d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::avg_pool3d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::adaptive_avg_pool3d", K::Pooling, 1, 1, 1, kOwn},
    // Upsampling reads windows of its input as a pool does; in the table so that a feature map
    // keeps its layout through it (assign_layout) where ATen's kernels take channels-last.
    {"aten::upsample_nearest2d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_nearest2d.vec", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_bilinear2d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_bilinear2d.vec", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_nearest3d", K::Pooling, 1, 1, 1, kOwn},  // 3-D U-Nets', NDHWC
    {"aten::upsample_nearest3d.vec", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_trilinear3d", K::Pooling, 1, 1, 1, kOwn},
    {"aten::upsample_trilinear3d.vec", K::Pooling, 1, 1, 1, kOwn},
    // torch.compile's F.interpolate (kiln/_decompositions.py).
    {"kiln::interpolate", K::Pooling, 1, 1, 1, kOwn},
    // Padding (TensorFlow's 'same' convolutions pad first): it keeps a feature map's layout too.
    {"aten::constant_pad_nd", K::Copy, 1, 1, 1, kOwn},
    {"aten::pad", K::Copy, 1, 1, 1, kOwn},
    {"aten::adaptive_avg_pool2d", K::Pooling, 1, 1, 1, kPlanned},
    // Views and layout.
    {"aten::view", K::View, 1, 1, 1, kOwn},
    {"aten::reshape", K::View, 1, 1, 1, kOwn},
    {"aten::_unsafe_view", K::View, 1, 1, 1, kOwn},
    {"aten::permute", K::View, 1, 1, 1, kOwn},
    {"aten::transpose.int", K::View, 1, 1, 1, kOwn},
    {"aten::swapaxes", K::View, 1, 1, 1, kOwn},  // transpose by other names (MaxViT, traced)
    {"aten::swapdims", K::View, 1, 1, 1, kOwn},
    {"aten::movedim.int", K::View, 1, 1, 1, kOwn},
    {"aten::movedim.intlist", K::View, 1, 1, 1, kOwn},
    {"aten::unflatten.int", K::View, 1, 1, 1, kOwn},
    {"aten::view_as", K::View, 2, 2, 1, kOwn},
    {"aten::reshape_as", K::View, 2, 2, 1, kOwn},  // LeViT, traced
    {"aten::t", K::View, 1, 1, 1, kOwn},
    {"aten::flatten.using_ints", K::View, 1, 1, 1, kOwn},
    {"aten::squeeze", K::View, 1, 1, 1, kOwn},
    {"aten::squeeze.dim", K::View, 1, 1, 1, kOwn},
    {"aten::squeeze.dims", K::View, 1, 1, 1, kOwn},
    {"aten::unsqueeze", K::View, 1, 1, 1, kOwn},
    {"aten::expand", K::View, 1, 1, 1, kOwn},
    {"aten::expand_as", K::View, 2, 2, 1, kOwn},
    {"aten::select.int", K::View, 1, 1, 1, kOwn},
    {"aten::slice.Tensor", K::View, 1, 1, 1, kOwn},
    {"aten::narrow", K::View, 1, 1, 1, kOwn},
    {"aten::alias", K::View, 1, 1, 1, kOwn},
    {"aten::as_strided", K::View, 1, 1, 1, kOwn},
    {"aten::contiguous", K::View, 1, 1, 1, kOwn},  // returns its input when already contiguous
    {"aten::dropout", K::View, 1, 1, 1, kOwn},     // identity in eval mode
    {"aten::clone", K::Copy, 1, 1, 1, kOwn},
    {"aten::cat", K::Copy, 1, kAny, 1, kPlanned},
    {"aten::stack", K::Copy, 1, kAny, 1, kPlanned},  // SKNet's branches: keeps their layout
};

}  // namespace

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case K::Constant:
      return "constant";
    case K::Elementwise:
      return "elementwise";
    case K::Reduction:
      return "reduction";
    case K::Normalization:
      return "normalization";
    case K::Gemm:
      return "gemm";
    case K::Convolution:
      return "convolution";
    case K::Pooling:
      return "pooling";
    case K::View:
      return "view";
    case K::Copy:
      return "copy";
  }
  return "unknown";
}

bool is_qualified_op_name(std::string_view name) {
  auto sep = name.find("::");
  if (sep == std::string_view::npos || sep == 0) return false;
  auto is_ident = [](std::string_view s) {
    if (s.empty()) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
  };
  std::string_view ns = name.substr(0, sep);
  std::string_view rest = name.substr(sep + 2);
  auto dot = rest.find('.');
  if (dot == std::string_view::npos) return is_ident(ns) && is_ident(rest);
  return is_ident(ns) && is_ident(rest.substr(0, dot)) && is_ident(rest.substr(dot + 1));
}

}  // namespace kiln::ir
