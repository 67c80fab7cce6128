// match_conv_layout gives a convolution's meta outputs (contiguous, as the meta kernels that
// torch registers from Python return them) the layout of the tensors ATen's CPU kernels return.
#include "backend/capture/conv_layout.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

constexpr auto kNhwc = at::MemoryFormat::ChannelsLast;

at::Tensor meta_of(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

c10::IValue ints(std::vector<int64_t> v) {
  return c10::IValue(std::move(v));
}

// The strides match_conv_layout gives convolution(input, weight, bias) (3x3, padding 1,
// `groups`), next to those of the real kernel's output.
std::pair<std::vector<int64_t>, std::vector<int64_t>> forward_strides(const at::Tensor& input,
                                                                      const at::Tensor& weight,
                                                                      int64_t groups) {
  const at::Tensor bias = at::randn({weight.size(0)}, weight.options());
  const at::Tensor real =
      at::convolution(input, weight, bias, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, groups);
  torch::jit::Stack inputs = {meta_of(input), meta_of(weight), meta_of(bias),
                              ints({1, 1}),   ints({1, 1}),    ints({1, 1}),
                              false,          ints({0, 0}),    groups};
  torch::jit::Stack outputs = {at::empty(real.sizes(), real.options().device(at::kMeta))};
  match_conv_layout("aten::convolution", inputs, outputs, at::kCPU);
  return {outputs.at(0).toTensor().strides().vec(), real.strides().vec()};
}

TEST(ConvLayout, ForwardOutputsAreLaidOutAsTheCpuKernelReturnsThem) {
  const at::Tensor x = at::randn({2, 8, 6, 6}), w = at::randn({16, 8, 3, 3});
  const at::Tensor depthwise = at::randn({8, 1, 3, 3});
  for (const auto& [input, weight, groups] :
       std::vector<std::tuple<at::Tensor, at::Tensor, int64_t>>{
           {x, w, 1},
           {x.contiguous(kNhwc), w, 1},
           {x, w.contiguous(kNhwc), 1},
           {x.contiguous(kNhwc), depthwise, 8},
           {x.to(at::kDouble).contiguous(kNhwc), w.to(at::kDouble), 1}}) {
    auto [matched, real] = forward_strides(input, weight, groups);
    EXPECT_EQ(matched, real) << "input strides " << input.strides() << ", weight strides "
                             << weight.strides() << ", groups " << groups;
  }
  // The case this is for: a contiguous meta output where the CPU kernel returns channels last.
  auto [matched, real] = forward_strides(x.contiguous(kNhwc), w, 1);
  EXPECT_EQ(real, at::empty({2, 16, 6, 6}).contiguous(kNhwc).strides().vec());
}

TEST(ConvLayout, BackwardGradientsAreLaidOutAsTheCpuKernelReturnsThem) {
  const at::Tensor input = at::randn({2, 8, 6, 6}).contiguous(kNhwc);
  const at::Tensor weight = at::randn({16, 8, 3, 3});
  const at::Tensor grad = at::randn({2, 16, 6, 6}).contiguous(kNhwc);
  auto [grad_input, grad_weight, grad_bias] =
      at::convolution_backward(grad, input, weight, std::vector<int64_t>{16}, {1, 1}, {1, 1},
                               {1, 1}, false, {0, 0}, 1, {true, true, true});
  torch::jit::Stack inputs = {meta_of(grad),
                              meta_of(input),
                              meta_of(weight),
                              ints({16}),
                              ints({1, 1}),
                              ints({1, 1}),
                              ints({1, 1}),
                              false,
                              ints({0, 0}),
                              int64_t{1},
                              c10::IValue(std::vector<bool>{true, true, true})};
  auto meta = [](const at::Tensor& t) {
    return at::empty(t.sizes(), t.options().device(at::kMeta));
  };
  torch::jit::Stack outputs = {meta(grad_input), meta(grad_weight), meta(grad_bias)};
  match_conv_layout("aten::convolution_backward", inputs, outputs, at::kCPU);
  EXPECT_EQ(outputs.at(0).toTensor().strides(), grad_input.strides());
  EXPECT_EQ(outputs.at(1).toTensor().strides(), grad_weight.strides());
  EXPECT_EQ(outputs.at(2).toTensor().strides(), grad_bias.strides());
  EXPECT_FALSE(grad_input.is_contiguous());  // channels last: the meta kernel's layout was wrong
}

TEST(ConvLayout, OtherOpsAreLeftAlone) {
  torch::jit::Stack inputs = {at::empty({2, 8, 6, 6}, at::kMeta).contiguous(kNhwc)};
  torch::jit::Stack outputs = {at::empty({2, 8, 6, 6}, at::kMeta)};
  match_conv_layout("aten::relu", inputs, outputs, at::kCPU);
  EXPECT_TRUE(outputs.at(0).toTensor().is_contiguous());
}

}  // namespace
}  // namespace kiln
