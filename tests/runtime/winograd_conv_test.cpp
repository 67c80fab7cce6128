// kiln::winograd_conv2d (runtime/winograd_conv.h) against ATen's convolution in float64: sizes
// that leave partial tiles, channel counts that leave partial vectors, every epilogue, the out=
// form and the errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "runtime/winograd_conv.h"
#include "support/float64_close.h"

namespace kiln {
namespace {

struct Case {
  int64_t n, c, k, h, w;
};

// Within 2e-5 x (1 + max |want|): F(4x4, 3x3)'s float32 rounding scales with the tile's values,
// not each output's (inputs and weights of unit scale: weights are scaled by 1/(3 sqrt C), so
// outputs are of unit scale too). A wrong transform coefficient is off by O(1).
void expect_close(const at::Tensor& got, const at::Tensor& want) {
  testing::expect_close(got, want, 2e-5);
}

TEST(WinogradConv, MatchesAtenConvolutionWithEveryEpilogue) {
  at::manual_seed(0);
  for (const Case& s : {Case{1, 12, 16, 8, 8}, Case{2, 5, 7, 9, 11}, Case{3, 16, 16, 1, 1},
                        Case{1, 70, 130, 13, 6}, Case{2, 33, 17, 2, 5}, Case{1, 64, 64, 14, 14}}) {
    const at::Tensor x = at::randn({s.n, s.c, s.h, s.w}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor w = at::randn({s.k, s.c, 3, 3}) / (3 * std::sqrt(double(s.c)));
    const at::Tensor b = at::randn({s.k});
    const at::Tensor other = at::randn({s.n, s.k, s.h, s.w});
    const at::Tensor u = winograd_weight(w);
    EXPECT_EQ(u.sizes(), (std::vector<int64_t>{36, s.c, s.k}));
    const at::Tensor conv = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble),
                                       /*stride=*/1, /*padding=*/1);
    const at::Tensor plain = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), {}, 1, 1);
    SCOPED_TRACE(::testing::Message()
                 << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " -> " << s.k);
    expect_close(winograd_conv2d(x, w, u, b, std::nullopt, "none"), conv);
    expect_close(winograd_conv2d(x, w, u, std::nullopt, std::nullopt, "none"), plain);
    expect_close(winograd_conv2d(x, w, u, b, std::nullopt, "relu"), at::relu(conv));
    expect_close(winograd_conv2d(x, w, u, b, other, "relu"),
                 at::relu(conv + other.to(at::kDouble)));
    const at::Tensor y = winograd_conv2d(x, w, u, std::nullopt, other, "none");
    expect_close(y, plain + other.to(at::kDouble));
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  }
}

TEST(WinogradConv, TakesAnyInputLayoutAndWritesAnyOutLayout) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({2, 20, 10, 7});  // NCHW
  const at::Tensor w = at::randn({24, 20, 3, 3}) / 13.0;
  const at::Tensor want = at::conv2d(x.to(at::kDouble), w.to(at::kDouble), {}, 1, 1);
  const at::Tensor u = winograd_weight(w);
  at::Tensor out = at::full({2, 24, 10, 7}, std::nan(""));  // NCHW, poisoned
  winograd_conv2d_out(x, w, u, std::nullopt, std::nullopt, "none", out);
  EXPECT_TRUE(out.is_contiguous());
  expect_close(out, want);
}

TEST(WinogradConv, NanAndInfinityPropagateAsInAConvolution) {
  at::Tensor x = at::ones({1, 16, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  x.index_put_({0, 3, 2, 5}, std::nan(""));
  const at::Tensor w = at::full({16, 16, 3, 3}, 0.01);
  const at::Tensor want = at::conv2d(x, w, {}, 1, 1);
  const at::Tensor got =
      winograd_conv2d(x, w, winograd_weight(w), std::nullopt, std::nullopt, "relu");
  // NaN reaches exactly the outputs whose 3x3 window covers it (the transforms would spread it
  // over whole tiles), relu keeping it NaN.
  EXPECT_TRUE(at::equal(at::isnan(got), at::isnan(want)));
  EXPECT_EQ(at::isnan(got).sum().item<int64_t>(), 16 * 9);
  // An infinity: +inf where the direct convolution has it, not the NaN of inf - inf.
  at::Tensor y = at::ones({1, 16, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  y.index_put_({0, 0, 7, 7}, INFINITY);
  const at::Tensor direct = at::conv2d(y, w, {}, 1, 1);
  const at::Tensor winograd =
      winograd_conv2d(y, w, winograd_weight(w), std::nullopt, std::nullopt, "none");
  EXPECT_TRUE(at::equal(at::isinf(winograd), at::isinf(direct)));
  EXPECT_FALSE(at::isnan(winograd).any().item<bool>());
}

TEST(WinogradConv, BadArgumentsSayWhatIsAllowed) {
  const at::Tensor x = at::randn({1, 8, 6, 6});
  const at::Tensor w = at::randn({4, 8, 3, 3});
  const at::Tensor u = winograd_weight(w);
  const auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  const auto says = [&](const std::function<void()>& call, const std::string& text) {
    const std::string got = message(call);
    EXPECT_NE(got.find(text), std::string::npos) << got;
  };
  says([&] { winograd_conv2d(x, w, u, std::nullopt, std::nullopt, "gelu"); },
       "activation must be \"none\" or \"relu\", got \"gelu\"");
  says([&] { winograd_conv2d(x.narrow(1, 0, 4), w, u, std::nullopt, std::nullopt, "none"); },
       "weight must be a float32 [K, C, 3, 3] filter with C = 4");
  says([&] { winograd_conv2d(x, w, u.narrow(2, 0, 3), std::nullopt, std::nullopt, "none"); },
       "transformed must be kiln::winograd_weight(weight), a float32 [36, 8, 4] tensor");
  says([&] { winograd_conv2d(x, w, u, at::randn({5}), std::nullopt, "none"); },
       "bias must be a float32 CPU vector of 4 elements");
  says(
      [&] {
        winograd_conv2d(x, w, u, std::nullopt, at::randn({1, 4, 6, 5}), "none");
      },
      "other must be a float32 CPU tensor of the output's sizes [1, 4, 6, 6]");
  says([&] { winograd_weight(at::randn({4, 8, 5, 5})); }, "dense float32 [K, C, 3, 3]");
}

TEST(WinogradConv, RegisteredWithTheDispatcherWithAnOutOverload) {
  auto& dispatcher = c10::Dispatcher::singleton();
  EXPECT_TRUE(dispatcher.findSchema({"kiln::winograd_weight", ""}));
  EXPECT_TRUE(dispatcher.findSchema({"kiln::winograd_conv2d", ""}));
  EXPECT_TRUE(dispatcher.findSchema({"kiln::winograd_conv2d", "out"}));
}

}  // namespace
}  // namespace kiln
