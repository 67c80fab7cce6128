#pragma once

namespace kiln::onednn {

/// What a convolution or a linear layer computes after its sum (and a convolution's residual
/// add), as a oneDNN post-op: nothing, max(x, 0), min(max(x, lo), hi), x sigmoid(x) (SiLU),
/// sigmoid(x), x relu6(x + 3) / 6 (hardswish), relu6(x + 3) / 6 (hardsigmoid), GELU with erf
/// (ATen's approximate="none") or with tanh (approximate="tanh").
enum class Activation { None, Relu, Clip, Silu, Sigmoid, Hardswish, Hardsigmoid, Gelu, GeluTanh };

}  // namespace kiln::onednn
