#include "runtime/onednn_matmul.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "runtime/onednn/matmul_primitive.h"
#include "runtime/onednn_linear.h"

namespace kiln {
namespace {

using onednn::MatmulPrimitive;
using onednn::MatmulSpec;
using onednn::OperandLayout;

/// A 2-D matrix's layout as oneDNN reads it: row-major, transposed (its transpose row-major), or
/// neither (nullopt: copy it). Sizes of 1 leave a stride unread, as for is_contiguous.
std::optional<OperandLayout> dense_layout(const at::Tensor& m) {
  const int64_t rows = m.size(0), cols = m.size(1);
  if ((cols == 1 || m.stride(1) == 1) && (rows == 1 || m.stride(0) == cols)) {
    return OperandLayout::RowMajor;
  }
  if ((rows == 1 || m.stride(0) == 1) && (cols == 1 || m.stride(1) == rows)) {
    return OperandLayout::Transposed;
  }
  return std::nullopt;
}

}  // namespace

at::Tensor& onednn_matmul_out(const at::Tensor& input, const at::Tensor& other,
                              const std::optional<at::Tensor>& bias, bool other_transposed,
                              std::string_view activation, at::Tensor& out) {
  TORCH_CHECK(input.dim() >= 2 && input.scalar_type() == at::kFloat && input.is_cpu(),
              "kiln::onednn_matmul: input must be a float32 CPU tensor of 2 or more dims, got ",
              input.sizes(), " ", input.scalar_type());
  TORCH_CHECK(other.dim() == 2 && other.scalar_type() == at::kFloat && other.is_cpu(),
              "kiln::onednn_matmul: other must be a 2-D float32 CPU tensor, got ", other.sizes(),
              " ", other.scalar_type());
  // b: the [k, n] matrix the product reads.
  const at::Tensor b = other_transposed ? other.t() : other;
  const int64_t k = b.size(0), n = b.size(1);
  TORCH_CHECK(input.size(-1) == k, "kiln::onednn_matmul: input's last dim ", input.size(-1),
              " must be ", other_transposed ? "other's second" : "other's first", ", got other ",
              other.sizes());
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) {
    TORCH_CHECK(bias->dim() == 1 && bias->numel() == n && bias->scalar_type() == at::kFloat &&
                    bias->is_cpu(),
                "kiln::onednn_matmul: bias must be a float32 CPU vector of ", n, " values, got ",
                bias->sizes(), " ", bias->scalar_type());
  }
  TORCH_CHECK(out.scalar_type() == at::kFloat && out.is_cpu(),
              "kiln::onednn_matmul: out must be a float32 CPU tensor");
  std::vector<int64_t> out_sizes = input.sizes().vec();
  out_sizes.back() = n;
  if (out.sizes() != at::IntArrayRef(out_sizes)) out.resize_(out_sizes);
  int64_t rows = 1;  // not numel / k: with k = 0 there are rows all the same
  for (int64_t d = 0; d + 1 < input.dim(); ++d)
    rows *= input.size(d);
  const onednn::Activation after = linear_activation_named(activation);
  if (rows == 0 || n == 0) return out;
  if (k == 0) {  // nothing to multiply: the bias, or zeros
    has_bias ? out.copy_(bias->expand(out_sizes)) : out.zero_();
    apply_linear_activation(out, after);
    return out;
  }
  at::Tensor x = input.dim() == 2 ? input : input.reshape({rows, k});
  std::optional<OperandLayout> x_layout = dense_layout(x);
  if (!x_layout) {
    x = x.contiguous();
    x_layout = OperandLayout::RowMajor;
  }
  at::Tensor w = b;
  std::optional<OperandLayout> w_layout = dense_layout(w);
  if (!w_layout) {
    w = w.contiguous();
    w_layout = OperandLayout::RowMajor;
  }
  MatmulSpec spec;
  spec.rows = rows;
  spec.k = k;
  spec.n = n;
  spec.source_transposed = *x_layout == OperandLayout::Transposed;
  spec.weights = *w_layout;
  spec.bias = has_bias;
  spec.activation = after;
  spec.threads = at::get_num_threads();
  const at::Tensor bias_values = has_bias ? bias->contiguous() : at::Tensor();
  at::Tensor target = out.is_contiguous() && !out.is_same(input) && !out.is_same(other)
                          ? out
                          : at::empty(out_sizes, out.options());
  MatmulPrimitive::get(spec)->run(x.const_data_ptr<float>(), w.const_data_ptr<float>(),
                                  has_bias ? bias_values.const_data_ptr<float>() : nullptr,
                                  target.data_ptr<float>());
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

namespace {

at::Tensor matmul_op(const at::Tensor& input, const at::Tensor& other,
                     const std::optional<at::Tensor>& bias, bool other_transposed,
                     c10::string_view activation) {
  std::vector<int64_t> sizes = input.sizes().vec();
  if (!sizes.empty() && other.dim() == 2) sizes.back() = other.size(other_transposed ? 0 : 1);
  at::Tensor out = at::empty(sizes, input.options());
  return onednn_matmul_out(input, other, bias, other_transposed, std::string_view(activation), out);
}

at::Tensor& matmul_out_op(const at::Tensor& input, const at::Tensor& other,
                          const std::optional<at::Tensor>& bias, bool other_transposed,
                          c10::string_view activation, at::Tensor& out) {
  return onednn_matmul_out(input, other, bias, other_transposed, std::string_view(activation), out);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(kiln, m) {
  m.def(
      "onednn_matmul(Tensor input, Tensor other, Tensor? bias, bool other_transposed, "
      "str activation=\"none\") -> Tensor");
  m.def(
      "onednn_matmul.out(Tensor input, Tensor other, Tensor? bias, bool other_transposed, "
      "str activation=\"none\", *, Tensor(a!) out) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(kiln, CPU, m) {
  m.impl("onednn_matmul", &matmul_op);
  m.impl("onednn_matmul.out", &matmul_out_op);
}

}  // namespace kiln
