#include "backend/capture/conv_layout.h"

#include <ATen/ATen.h>
#include <ATen/native/ConvUtils.h>
#include <c10/core/TensorImpl.h>

namespace kiln {
namespace {

// A tensor on `device` with the sizes, strides and dtype of `meta` and no memory: what backend
// selection reads (device, dtype, layout), never the data.
at::Tensor shell(const at::Tensor& meta, c10::Device device) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, at::DataPtr(nullptr, device),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto shell = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage),
      c10::DispatchKeySet(c10::computeDispatchKey(std::nullopt, at::kStrided, device)),
      meta.dtype());
  shell.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes(), meta.strides());
  return shell;
}

void restride(c10::IValue& out, at::MemoryFormat format) {
  if (!out.isTensor() || !out.toTensor().defined()) return;
  out = out.toTensor().contiguous(format);
}

}  // namespace

void match_conv_layout(const std::string& op, const torch::jit::Stack& inputs,
                       torch::jit::Stack& outputs, c10::Device device) {
  // aten::_convolution's first nine arguments are aten::convolution's.
  const bool forward = op == "aten::convolution" || op == "aten::_convolution";
  if (!forward && op != "aten::convolution_backward") return;
  // convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
  // groups); convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
  // dilation, transposed, output_padding, groups, output_mask).
  const size_t first = forward ? 0 : 1;
  const at::Tensor& input = inputs.at(first).toTensor();
  const at::Tensor& weight = inputs.at(first + 1).toTensor();
  const int64_t rank = weight.dim();
  if (rank != 4 && rank != 5) return;  // 1-d convolutions stay contiguous
  const size_t args = first + 3;       // stride, padding, ...
  std::vector<int64_t> stride = inputs.at(args).toIntVector(),
                       padding = inputs.at(args + 1).toIntVector(),
                       dilation = inputs.at(args + 2).toIntVector(),
                       output_padding = inputs.at(args + 4).toIntVector();
  std::optional<std::vector<c10::SymInt>> bias_sizes;
  if (!forward && !inputs.at(3).isNone()) {
    bias_sizes.emplace();
    for (int64_t size : inputs.at(3).toIntVector())
      bias_sizes->emplace_back(size);
  }
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  try {
    const at::Tensor input_shell = shell(input, device), weight_shell = shell(weight, device);
    std::optional<at::Tensor> bias;
    if (forward && inputs.at(2).isTensor()) bias = shell(inputs.at(2).toTensor(), device);
    const auto backend = at::native::select_conv_backend(
        input_shell, weight_shell, bias, c10::fromIntArrayRefSlow(stride),
        c10::fromIntArrayRefSlow(padding), c10::fromIntArrayRefSlow(dilation),
        inputs.at(args + 3).toBool(), c10::fromIntArrayRefSlow(output_padding),
        c10::SymInt(inputs.at(args + 5).toInt()),
        bias_sizes ? at::OptionalSymIntArrayRef(*bias_sizes) : std::nullopt);
    format = at::native::_determine_backend_memory_format(input_shell, weight_shell, backend);
  } catch (const std::exception&) {
    return;  // the meta kernel's layout: the plan copies if the kernel returns another
  }
  if (format == at::MemoryFormat::Contiguous) return;
  // As FakeTensor does: the output, or grad_input and grad_weight (never grad_bias).
  restride(outputs.at(0), format);
  if (!forward) restride(outputs.at(1), format);
}

void match_group_norm_layout(const std::string& op, const torch::jit::Stack& inputs,
                             torch::jit::Stack& outputs, c10::Device device) {
  if (op != "aten::group_norm" || !device.is_cpu() || !inputs.at(0).isTensor()) return;
  const at::MemoryFormat format = inputs.at(0).toTensor().suggest_memory_format();
  if (format != at::MemoryFormat::Contiguous) restride(outputs.at(0), format);
}

}  // namespace kiln
