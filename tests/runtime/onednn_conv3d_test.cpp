// kiln::onednn_conv3d (runtime/onednn_conv.h) against ATen's conv3d in float64: dense 3x3x3,
// the factored (1, 3, 3) and (3, 1, 1) kernels of R(2+1)D, strides that differ per dim, groups,
// dilation, a 3-channel stem read from an NCDHW clip, post-ops and residuals, bf16, and errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <vector>

#include "support/float64_close.h"

#ifdef KILN_WITH_ONEDNN
#include "runtime/onednn_conv.h"
#include "runtime/onednn_support.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_ONEDNN

using testing::expect_close;
using Triple = std::vector<int64_t>;

struct Case {
  int64_t n, c, k, d, h, w;
  Triple kernel, stride, padding, dilation;
  int64_t groups;
};

// Inputs and weights of unit scale over the filter's fan-in: outputs of unit scale.
struct Conv3d {
  Case s;
  at::Tensor x, w, b, other;

  explicit Conv3d(const Case& c) : s(c) {
    x = at::randn({s.n, s.c, s.d, s.h, s.w}).contiguous(at::MemoryFormat::ChannelsLast3d);
    const int64_t taps = s.kernel[0] * s.kernel[1] * s.kernel[2];
    w = at::randn({s.k, s.c / s.groups, s.kernel[0], s.kernel[1], s.kernel[2]}) /
        std::sqrt(double(s.c / s.groups * taps));
    b = at::randn({s.k});
    other = at::randn(reference(false).sizes()).contiguous(at::MemoryFormat::ChannelsLast3d);
  }

  at::Tensor reference(bool bias, bool bf16 = false) const {
    const auto exact = [&](const at::Tensor& t) {
      return (bf16 ? t.to(at::kBFloat16) : t).to(at::kDouble);
    };
    return at::conv3d(exact(x), exact(w), bias ? b.to(at::kDouble) : at::Tensor(), s.stride,
                      s.padding, s.dilation, s.groups);
  }

  at::Tensor run(bool bias, bool residual, const std::string& activation,
                 const std::string& precision = "fp32") const {
    const at::Tensor packed =
        onednn_conv_weight(w, x.sizes(), s.stride, s.padding, s.dilation, s.groups, bias, residual,
                           activation, {}, precision);
    at::Tensor out = at::empty(other.sizes()).contiguous(at::MemoryFormat::ChannelsLast3d);
    return onednn_conv_out(x, w, packed, bias ? std::optional<at::Tensor>(b) : std::nullopt,
                           residual ? std::optional<at::Tensor>(other) : std::nullopt, s.stride,
                           s.padding, s.dilation, s.groups, activation, {}, precision, "fp32", out);
  }
};

std::vector<Case> cases() {
  return {
      {1, 16, 24, 4, 9, 9, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1},   // dense 3x3x3
      {2, 16, 32, 5, 8, 7, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, 1},   // R(2+1)D's spatial
      {1, 32, 16, 6, 5, 5, {3, 1, 1}, {2, 1, 1}, {1, 0, 0}, {1, 1, 1}, 1},   // and temporal
      {1, 3, 16, 6, 17, 17, {3, 7, 7}, {1, 2, 2}, {1, 3, 3}, {1, 1, 1}, 1},  // a stem
      {1, 24, 48, 4, 7, 7, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 4},   // grouped
      {1, 24, 24, 4, 7, 7, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 24},  // depthwise
      {1, 8, 8, 6, 9, 9, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 1, 2}, 1},     // dilated
      {1, 64, 32, 1, 1, 1, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1},   // one voxel
  };
}

TEST(OneDnnConv3d, MatchesAtenConv3dWithItsEpilogues) {
  at::manual_seed(0);
  for (const Case& s : cases()) {
    SCOPED_TRACE(::testing::Message()
                 << s.c << "x" << s.d << "x" << s.h << "x" << s.w << " -> " << s.k << ", kernel "
                 << at::IntArrayRef(s.kernel) << ", groups " << s.groups);
    Conv3d conv(s);
    const at::Tensor plain = conv.reference(false), biased = conv.reference(true);
    const at::Tensor other = conv.other.to(at::kDouble);
    expect_close(conv.run(false, false, "none"), plain);
    expect_close(conv.run(true, false, "relu"), at::relu(biased));
    expect_close(conv.run(true, true, "relu"), at::relu(biased + other));
    expect_close(conv.run(true, false, "silu"), at::silu(biased));
    const at::Tensor y = conv.run(false, true, "none");
    expect_close(y, plain + other);
    EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast3d));
    // A clip in NCDHW, as a network's input comes: converted inside, same result.
    conv.x = conv.x.contiguous();
    expect_close(conv.run(true, false, "relu"), at::relu(biased));
  }
}

// In bf16 the result is the float64 convolution of the rounded input and weight, to float32's
// rounding of the sums; ~1e-3 from the unrounded one over the output's norm.
TEST(OneDnnConv3d, MultipliesInBf16WhenAsked) {
  if (!onednn_native_bf16()) GTEST_SKIP() << "this CPU has no native bf16 (avx512_bf16 or AMX)";
  at::manual_seed(1);
  for (const Case& s : cases()) {
    if (s.c / s.groups < 16) continue;  // onednn_conv keeps those float32
    SCOPED_TRACE(::testing::Message() << s.c << " -> " << s.k << ", groups " << s.groups);
    const Conv3d conv(s);
    const at::Tensor got = conv.run(true, true, "relu", "bf16");
    const at::Tensor other = conv.other.to(at::kDouble);
    const at::Tensor exact = at::relu(conv.reference(true) + other);
    const double error = ((got.to(at::kDouble) - exact).norm() / exact.norm()).item<double>();
    EXPECT_LT(error, 1e-2);
    EXPECT_GT(error, 1e-5);  // or it did not multiply in bf16
    expect_close(got, at::relu(conv.reference(true, true) + other));
  }
}

TEST(OneDnnConv3d, BadArgumentsAreClearErrors) {
  const Conv3d conv(Case{1, 8, 8, 4, 6, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1});
  const at::Tensor packed = onednn_conv_weight(conv.w, conv.x.sizes(), {1, 1, 1}, {1, 1, 1},
                                               {1, 1, 1}, 1, false, false, "none", {});
  // As a graph calls it: the 3-D op, whatever it is given.
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("kiln::onednn_conv3d", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                            at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t,
                            c10::string_view, at::ArrayRef<double>, c10::string_view,
                            c10::string_view)>();
  const auto message_of = [&](const at::Tensor& x, const at::Tensor& w, const Triple& stride) {
    try {
      op.call(x, w, packed, std::nullopt, std::nullopt, stride, {1, 1, 1}, {1, 1, 1}, 1, "none", {},
              "fp32", "fp32");
    } catch (const c10::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A 2-D image, a 2-D weight, two strides: each says what the 3-D op takes.
  EXPECT_NE(message_of(at::randn({1, 8, 6, 6}), conv.w, {1, 1, 1}).find("input must be 5-D"),
            std::string::npos);
  EXPECT_NE(message_of(conv.x, at::randn({8, 8, 3, 3}), {1, 1, 1}).find("weight must be a 5-D"),
            std::string::npos);
  EXPECT_NE(message_of(conv.x, conv.w, {1, 1}).find("stride must have 3 values"),
            std::string::npos);
  EXPECT_NE(message_of(conv.x, conv.w, {1, 1, 0}).find("strides and dilations must be positive"),
            std::string::npos);
  // Nothing wrong: the same call runs.
  EXPECT_EQ(message_of(conv.x, conv.w, {1, 1, 1}), "no error");
}

#else

TEST(OneDnnConv3d, NotBuilt) {
  GTEST_SKIP() << "built without kiln's oneDNN (KILN_WITH_ONEDNN)";
}

#endif

}  // namespace
}  // namespace kiln
