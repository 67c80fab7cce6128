// kiln::onednn_conv2d (runtime/onednn_conv.h) against ATen's convolution in float64: dense,
// depthwise and grouped filters, strides, padding and dilation, one-pixel inputs, every
// activation and epilogue,
// the out= form into any layout, a weight packed for another thread count, and the errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <thread>
#include <vector>

#include "support/float64_close.h"

#ifdef KILN_WITH_ONEDNN
#include "runtime/onednn_conv.h"
#include "runtime/onednn_support.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_ONEDNN

struct Case {
  int64_t n, c, k, h, w, kernel, stride, padding, dilation, groups;
};

// Inputs and weights of unit scale over the filter's fan-in: outputs of unit scale. A wrong tap or
// channel is off by O(1).
using testing::expect_close;

struct Conv {
  Case s;
  at::Tensor x, w, b, other;

  explicit Conv(const Case& c) : s(c) {
    x = at::randn({s.n, s.c, s.h, s.w}).contiguous(at::MemoryFormat::ChannelsLast);
    const double fan_in = double(s.c / s.groups * s.kernel * s.kernel);
    w = at::randn({s.k, s.c / s.groups, s.kernel, s.kernel}) / std::sqrt(fan_in);
    b = at::randn({s.k});
    other = at::randn(reference(false).sizes()).contiguous(at::MemoryFormat::ChannelsLast);
  }

  at::Tensor reference(bool bias) const {
    return at::conv2d(x.to(at::kDouble), w.to(at::kDouble), bias ? b.to(at::kDouble) : at::Tensor(),
                      s.stride, s.padding, s.dilation, s.groups);
  }

  at::Tensor packed(bool bias, bool residual, const std::string& activation,
                    const std::vector<double>& scalars = {},
                    const std::string& precision = "fp32") const {
    return onednn_conv_weight(w, x.sizes(), {s.stride, s.stride}, {s.padding, s.padding},
                              {s.dilation, s.dilation}, s.groups, bias, residual, activation,
                              scalars, precision);
  }

  at::Tensor run(bool bias, bool residual, const std::string& activation,
                 const std::vector<double>& scalars = {},
                 const std::string& precision = "fp32") const {
    at::Tensor out = at::empty(other.sizes()).contiguous(at::MemoryFormat::ChannelsLast);
    return onednn_conv_out(x, w, packed(bias, residual, activation, scalars, precision),
                           bias ? std::optional<at::Tensor>(b) : std::nullopt,
                           residual ? std::optional<at::Tensor>(other) : std::nullopt,
                           {s.stride, s.stride}, {s.padding, s.padding}, {s.dilation, s.dilation},
                           s.groups, activation, scalars, precision, "fp32", out);
  }
};

TEST(OneDnnConv, MatchesAtenConvolutionWithEveryEpilogue) {
  at::manual_seed(0);
  for (const Case& s : {
           Case{1, 16, 24, 9, 9, 3, 1, 1, 1, 1},     // dense 3x3
           Case{2, 72, 72, 14, 13, 3, 2, 1, 1, 72},  // depthwise, stride 2
           Case{1, 40, 40, 11, 11, 5, 1, 2, 1, 40},  // depthwise 5x5
           Case{1, 120, 32, 1, 1, 1, 1, 0, 1, 1},    // a squeeze-excitation gate: one pixel
           Case{3, 48, 96, 7, 5, 3, 1, 1, 1, 6},     // grouped
           Case{1, 8, 12, 12, 12, 3, 1, 2, 2, 1},    // dilated
           Case{2, 3, 16, 17, 17, 3, 2, 1, 1, 1},    // a stem: 3 channels
       }) {
    SCOPED_TRACE(::testing::Message()
                 << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " -> " << s.k << ", kernel "
                 << s.kernel << ", stride " << s.stride << ", groups " << s.groups);
    const Conv conv(s);
    const at::Tensor plain = conv.reference(false), biased = conv.reference(true);
    const at::Tensor other = conv.other.to(at::kDouble);
    expect_close(conv.run(false, false, "none"), plain);
    expect_close(conv.run(true, false, "none"), biased);
    expect_close(conv.run(true, false, "relu"), at::relu(biased));
    expect_close(conv.run(true, false, "hardtanh", {0.0, 6.0}), at::clamp(biased, 0.0, 6.0));
    expect_close(conv.run(true, true, "relu"), at::relu(biased + other));
    expect_close(conv.run(true, false, "silu"), at::silu(biased));
    expect_close(conv.run(true, false, "sigmoid"), at::sigmoid(biased));
    expect_close(conv.run(true, false, "hardswish"), at::hardswish(biased));
    expect_close(conv.run(true, false, "hardsigmoid"), at::hardsigmoid(biased));
    expect_close(conv.run(true, true, "silu"), at::silu(biased + other));
    const at::Tensor y = conv.run(false, true, "none");
    expect_close(y, plain + other);
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  }
}

// In bf16 the input and weight are rounded to 8 significant bits and the products summed in
// float32: the result is the float64 convolution of the rounded tensors (to float32's ~1e-6),
// ~1e-3 from the unrounded one over the output's norm. An NCHW image is rounded in the same
// reorder that makes it channels-last.
TEST(OneDnnConv, MultipliesInBf16WhenAsked) {
  if (!onednn_native_bf16())
    GTEST_SKIP() << "this CPU has no native bf16 (avx512_bf16 or AMX): oneDNN has no bf16 "
                    "primitives here, and precision=bf16 runs f32";
  at::manual_seed(4);
  for (const Case& s : {
           Case{1, 32, 48, 9, 9, 3, 1, 1, 1, 1},     // dense 3x3
           Case{2, 72, 72, 14, 13, 3, 2, 1, 1, 72},  // depthwise, stride 2
           Case{1, 64, 128, 7, 7, 1, 1, 0, 1, 1},    // 1x1
           Case{2, 3, 16, 17, 17, 3, 2, 1, 1, 1},    // a stem: 3 channels
       }) {
    SCOPED_TRACE(::testing::Message()
                 << s.c << " -> " << s.k << ", kernel " << s.kernel << ", groups " << s.groups);
    for (bool nchw : {false, true}) {
      Conv conv(s);
      if (nchw) conv.x = conv.x.contiguous();
      const at::Tensor got = conv.run(true, true, "relu", {}, "bf16");
      const at::Tensor other = conv.other.to(at::kDouble);
      const at::Tensor exact = at::relu(conv.reference(true) + other);
      const double error = ((got.to(at::kDouble) - exact).norm() / exact.norm()).item<double>();
      EXPECT_LT(error, 1e-2);
      EXPECT_GT(error, 1e-5);  // or it did not multiply in bf16
      const at::Tensor rounded = at::conv2d(
          conv.x.to(at::kBFloat16).to(at::kDouble), conv.w.to(at::kBFloat16).to(at::kDouble),
          conv.b.to(at::kDouble), s.stride, s.padding, s.dilation, s.groups);
      expect_close(got, at::relu(rounded + other));
    }
  }
}

// Between bf16 convolutions the activations may be bf16: a bf16 input is read as it is, a bf16
// residual added as it is, and out_precision "bf16" rounds the float32 result once, after the
// post-ops. Each is the float32 path's result with those tensors rounded: nothing else changes.
TEST(OneDnnConv, ReadsAndWritesBf16ActivationsWhenAsked) {
  if (!onednn_native_bf16()) GTEST_SKIP() << "this CPU has no native bf16 (avx512_bf16 or AMX)";
  at::manual_seed(6);
  for (const Case& s : {
           Case{1, 32, 48, 9, 9, 3, 1, 1, 1, 1},     // dense 3x3
           Case{2, 72, 72, 14, 13, 3, 2, 1, 1, 72},  // depthwise, stride 2
           Case{1, 64, 128, 7, 7, 1, 1, 0, 1, 1},    // 1x1
       }) {
    SCOPED_TRACE(::testing::Message()
                 << s.c << " -> " << s.k << ", kernel " << s.kernel << ", groups " << s.groups);
    const Conv conv(s);
    const at::Tensor packed = conv.packed(true, true, "relu", {}, "bf16");
    const at::Tensor x16 = conv.x.to(at::kBFloat16), other16 = conv.other.to(at::kBFloat16);
    const auto run = [&](const at::Tensor& x, const at::Tensor& other, bool bf16_output) {
      at::Tensor out =
          at::empty(conv.other.sizes(),
                    at::TensorOptions().dtype(bf16_output ? at::kBFloat16 : at::kFloat))
              .contiguous(at::MemoryFormat::ChannelsLast);
      onednn_conv_out(x, conv.w, packed, conv.b, other, {s.stride, s.stride},
                      {s.padding, s.padding}, {s.dilation, s.dilation}, s.groups, "relu", {},
                      "bf16", bf16_output ? "bf16" : "fp32", out);
      return out;
    };
    const at::Tensor f32 = run(conv.x, conv.other, false);
    // A bf16 input is the float32 one rounded as the convolution would round it: same result.
    expect_close(run(x16, conv.other, false), f32.to(at::kDouble));
    // A bf16 residual: the sum of the rounded residual.
    const at::Tensor rounded_other = run(conv.x, other16.to(at::kFloat), false);
    expect_close(run(conv.x, other16, false), rounded_other.to(at::kDouble));
    // A bf16 output: the float32 result, rounded once (at most one bf16 step apart).
    const at::Tensor y = run(x16, other16, true);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
    const at::Tensor step = rounded_other.abs() * (1.0 / 128) + 1e-30;
    EXPECT_TRUE(((y.to(at::kFloat) - rounded_other).abs() <= step).all().item<bool>());
  }
}

// A primitive's memory objects are made once per thread and re-pointed on later calls: each call
// must read and write its own tensors, on any number of threads at once.
TEST(OneDnnConv, EachCallReadsAndWritesItsOwnTensorsOnEveryThread) {
  at::manual_seed(5);
  const Case s{1, 32, 32, 7, 7, 3, 1, 1, 1, 1};
  for (const std::string precision : {"fp32", "bf16"}) {
    if (precision == "bf16" && !onednn_native_bf16()) continue;
    const Conv shape(s);
    const at::Tensor packed = shape.packed(true, true, "relu", {}, precision);
    auto call = [&](const Conv& conv) {
      at::Tensor out = at::empty(conv.other.sizes()).contiguous(at::MemoryFormat::ChannelsLast);
      return onednn_conv_out(conv.x, shape.w, packed, shape.b, conv.other, {1, 1}, {1, 1}, {1, 1},
                             1, "relu", {}, precision, "fp32", out);
    };
    auto expected = [&](const Conv& conv) {
      at::Tensor x = conv.x;
      at::Tensor w = shape.w;
      if (precision == "bf16") {
        x = x.to(at::kBFloat16).to(at::kFloat);
        w = w.to(at::kBFloat16).to(at::kFloat);
      }
      return at::relu(
          at::conv2d(x.to(at::kDouble), w.to(at::kDouble), shape.b.to(at::kDouble), 1, 1) +
          conv.other.to(at::kDouble));
    };
    constexpr int kThreads = 4, kCalls = 8;
    std::vector<std::vector<Conv>> inputs(kThreads);
    for (auto& calls : inputs)
      for (int i = 0; i < kCalls; ++i)
        calls.emplace_back(s);
    std::vector<std::vector<at::Tensor>> outputs(kThreads, std::vector<at::Tensor>(kCalls));
    // The caller's thread count on every thread, so all of them run the one primitive.
    const int omp_threads = at::get_num_threads();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        at::set_num_threads(omp_threads);
        for (int i = 0; i < kCalls; ++i)
          outputs[t][i] = call(inputs[t][i]);
      });
    }
    for (auto& thread : threads)
      thread.join();
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kCalls; ++i)
        expect_close(outputs[t][i], expected(inputs[t][i]));
    }
  }
}

TEST(OneDnnConv, TakesAnyInputLayoutAndWritesAnyOutLayout) {
  at::manual_seed(1);
  Conv conv(Case{2, 20, 24, 10, 7, 3, 1, 1, 1, 1});
  conv.x = conv.x.contiguous();  // NCHW
  conv.other = conv.other.contiguous();
  at::Tensor out = at::full({2, 24, 10, 7}, std::nan(""));  // NCHW, poisoned
  onednn_conv_out(conv.x, conv.w, conv.packed(true, true, "none"), conv.b, conv.other, {1, 1},
                  {1, 1}, {1, 1}, 1, "none", {}, "fp32", "fp32", out);
  EXPECT_TRUE(out.is_contiguous());
  expect_close(out, conv.reference(true) + conv.other.to(at::kDouble));
  // A channel slice of a channels-last tensor (SKNet's split branches): neither dense layout.
  const at::Tensor wide =
      at::randn({2, 40, 10, 7}).contiguous(at::MemoryFormat::ChannelsLast).narrow(1, 20, 20);
  conv.x = wide;
  onednn_conv_out(conv.x, conv.w, conv.packed(true, true, "none"), conv.b, conv.other, {1, 1},
                  {1, 1}, {1, 1}, 1, "none", {}, "fp32", "fp32", out);
  expect_close(out, conv.reference(true) + conv.other.to(at::kDouble));
}

// The memory plan may put the output over a residual that dies there: the convolution adds into
// it where it lies (oneDNN's sum post-op), giving the same bits as writing a buffer of its own.
// An output that overlaps the residual otherwise, or the input, still gets the right values.
TEST(OneDnnConv, AddsIntoAResidualThatIsItsOutput) {
  at::manual_seed(7);
  const Case s{1, 32, 64, 9, 9, 1, 1, 0, 1, 1};
  for (const std::string precision : {"fp32", "bf16"}) {
    if (precision == "bf16" && !onednn_native_bf16()) continue;
    SCOPED_TRACE(precision);
    const Conv conv(s);
    const at::Tensor packed = conv.packed(true, true, "relu", {}, precision);
    const auto dtype = precision == "bf16" ? at::kBFloat16 : at::kFloat;
    const at::Tensor x = conv.x.to(dtype), other = conv.other.to(dtype);
    const auto run = [&](const at::Tensor& residual, at::Tensor& out) {
      return onednn_conv_out(x, conv.w, packed, conv.b, residual, {1, 1}, {0, 0}, {1, 1}, 1, "relu",
                             {}, precision, precision, out);
    };
    at::Tensor apart = at::empty_like(other);
    run(other, apart);
    at::Tensor over = other.clone(at::MemoryFormat::ChannelsLast);
    run(over, over);
    EXPECT_TRUE(at::equal(over, apart));
    // The residual read through a view one pixel along: it overlaps the output but is not it.
    at::Tensor storage = at::empty({1, 10, 9, 64}, at::TensorOptions().dtype(dtype));
    at::Tensor out = storage.narrow(1, 0, 9).permute({0, 3, 1, 2});
    at::Tensor shifted = storage.narrow(1, 1, 9).permute({0, 3, 1, 2});
    shifted.copy_(other);
    run(shifted, out);
    EXPECT_TRUE(at::equal(out, apart));
  }
}

TEST(OneDnnConv, AWeightPackedForAnotherThreadCountIsPackedAgain) {
  at::manual_seed(2);
  const Conv conv(Case{1, 64, 64, 28, 28, 1, 1, 0, 1, 1});
  const int threads = at::get_num_threads();
  at::set_num_threads(threads == 1 ? 2 : 1);
  const at::Tensor packed = conv.packed(true, false, "relu");
  at::set_num_threads(threads);
  at::Tensor out = at::empty({1, 64, 28, 28}).contiguous(at::MemoryFormat::ChannelsLast);
  onednn_conv_out(conv.x, conv.w, packed, conv.b, std::nullopt, {1, 1}, {0, 0}, {1, 1}, 1, "relu",
                  {}, "fp32", "fp32", out);
  expect_close(out, at::relu(conv.reference(true)));
}

TEST(OneDnnConv, AWeightPackedForAnotherLayoutIsPackedAgainFromTheDenseOne) {
  // A header naming another layout (as after a thread-count change): the op must not read the
  // packed bytes as this primitive's layout, but pack the dense weight again.
  at::manual_seed(3);
  const Conv conv(Case{1, 32, 48, 9, 9, 3, 1, 1, 1, 1});
  at::Tensor packed = conv.packed(true, false, "relu").clone();
  packed.narrow(0, 0, 2).fill_(0);                       // the layout's identity (8 bytes)
  packed.narrow(0, 16, packed.numel() - 16).fill_(1e6);  // poisoned weights
  at::Tensor out = at::empty({1, 48, 9, 9}).contiguous(at::MemoryFormat::ChannelsLast);
  onednn_conv_out(conv.x, conv.w, packed, conv.b, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 1, "relu",
                  {}, "fp32", "fp32", out);
  expect_close(out, at::relu(conv.reference(true)));
}

TEST(OneDnnConv, BadArgumentsAreClearErrors) {
  const Conv conv(Case{1, 8, 8, 6, 6, 3, 1, 1, 1, 1});
  const at::Tensor packed = conv.packed(false, false, "none");
  at::Tensor out = at::empty({0});
  const auto run = [&](const at::Tensor& x, const at::Tensor& p, const std::string& activation,
                       int64_t groups = 1) {
    onednn_conv_out(x, conv.w, p, std::nullopt, std::nullopt, {1, 1}, {1, 1}, {1, 1}, groups,
                    activation, {}, "fp32", "fp32", out);
  };
  EXPECT_THROW(
      {
        try {
          run(conv.x, packed, "gelu");
        } catch (const c10::Error& e) {
          EXPECT_NE(std::string(e.what()).find("activation must be"), std::string::npos);
          throw;
        }
      },
      c10::Error);
  EXPECT_THROW(run(conv.x.to(at::kDouble), packed, "none"), c10::Error);
  EXPECT_THROW(run(conv.x, at::zeros({4}), "none"), c10::Error);           // not a packed weight
  EXPECT_THROW(run(conv.x, packed, "none", 3), c10::Error);                // 8 channels in 3 groups
  EXPECT_THROW(run(at::randn({1, 5, 6, 6}), packed, "none"), c10::Error);  // channels
  EXPECT_THROW(run(conv.x, packed, "hardtanh"), c10::Error);  // hardtanh without its bounds
  // bf16 tensors belong to a convolution that multiplies in bf16.
  EXPECT_THROW(run(conv.x.to(at::kBFloat16), packed, "none"), c10::Error);
  at::Tensor bf16_out = at::empty({1, 8, 6, 6}, at::kBFloat16);
  EXPECT_THROW(onednn_conv_out(conv.x, conv.w, packed, std::nullopt, std::nullopt, {1, 1}, {1, 1},
                               {1, 1}, 1, "none", {}, "fp32", "bf16", bf16_out),
               c10::Error);
  // The message names the argument that is wrong.
  try {
    onednn_conv_out(conv.x, conv.w, packed, std::nullopt, std::nullopt, {1, 1}, {1, 1}, {1, 1}, 1,
                    "none", {}, "fp32", "fp16", out);
    ADD_FAILURE() << "out_precision \"fp16\" was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(out_precision): precision must be"), std::string::npos)
        << e.what();
  }
}

#else

TEST(OneDnnConv, NotBuilt) {
  GTEST_SKIP() << "built without kiln's oneDNN (KILN_WITH_ONEDNN)";
}

#endif

}  // namespace
}  // namespace kiln
