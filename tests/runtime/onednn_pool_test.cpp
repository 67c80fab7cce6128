// kiln::onednn_max_pool2d (runtime/onednn_pool.h) against ATen's max_pool2d: the same values
// exactly (a max rounds nothing), in float32 and bf16, channels-last and NCHW, with padding,
// strides, dilation and ceil_mode; the out= form into any layout; the errors. And
// kiln::onednn_avg_pool2d against ATen's avg_pool2d, counting the padding or not, within float32's
// rounding (the sums may add in another order). Where oneDNN has no bf16 pooling (a CPU below
// AVX-512), the ops run ATen's pool inside and the bf16 cases check that path.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#ifdef KILN_WITH_ONEDNN
#include "runtime/onednn_pool.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_ONEDNN

struct Case {
  int64_t n, c, h, w, kernel, stride, padding, dilation;
  bool ceil_mode;
};

at::Tensor pooled(const at::Tensor& x, const Case& s, at::Tensor out = {}) {
  if (!out.defined()) out = at::empty({0}, x.options());
  return onednn_max_pool2d_out(x, {s.kernel, s.kernel}, {s.stride, s.stride},
                               {s.padding, s.padding}, {s.dilation, s.dilation}, s.ceil_mode, out);
}

TEST(OneDnnMaxPool, GivesAtensValuesInEveryLayoutAndType) {
  at::manual_seed(0);
  for (const Case& s : {
           Case{1, 64, 112, 112, 3, 2, 1, 1, false},  // ResNet's, after its stem
           Case{2, 16, 7, 7, 2, 2, 0, 1, false},      // odd size: the last row dropped
           Case{2, 16, 7, 7, 2, 2, 0, 1, true},       // ceil_mode: kept
           Case{1, 8, 10, 9, 3, 2, 1, 1, true},       // ceil_mode and padding
           Case{1, 24, 12, 12, 3, 1, 1, 2, false},    // dilated
           Case{3, 5, 4, 4, 4, 4, 0, 1, false},       // one output pixel, few channels
       }) {
    SCOPED_TRACE(::testing::Message() << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " k"
                                      << s.kernel << " s" << s.stride << " p" << s.padding << " d"
                                      << s.dilation << (s.ceil_mode ? " ceil" : ""));
    for (const auto type : {at::kFloat, at::kBFloat16}) {
      for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
        const at::Tensor x = at::randn({s.n, s.c, s.h, s.w}).to(type).contiguous(format);
        const at::Tensor want =
            at::max_pool2d(x, s.kernel, s.stride, s.padding, s.dilation, s.ceil_mode);
        const at::Tensor got = pooled(x, s);
        ASSERT_EQ(got.sizes(), want.sizes());
        EXPECT_EQ(got.scalar_type(), type);
        EXPECT_TRUE(got.is_contiguous(format));
        EXPECT_TRUE(at::equal(got, want));
      }
    }
  }
}

TEST(OneDnnMaxPool, WritesAnyOutLayoutAndReadsAnyInputLayout) {
  at::manual_seed(1);
  const Case s{2, 12, 9, 9, 3, 2, 1, 1, false};
  const at::Tensor x = at::randn({2, 9, 9, 12}).permute({0, 3, 2, 1});  // neither layout
  const at::Tensor want = at::max_pool2d(x, 3, 2, 1);
  at::Tensor out = at::full({2, 12, 5, 5}, std::nan("")).contiguous(at::MemoryFormat::ChannelsLast);
  pooled(x, s, out);
  EXPECT_TRUE(at::equal(out, want));
  EXPECT_TRUE(out.is_contiguous(at::MemoryFormat::ChannelsLast));
}

// ATen's max propagates a NaN into every window that holds one (oneDNN's would skip it).
TEST(OneDnnMaxPool, ANanIsPropagatedAsAtenDoes) {
  for (const auto type : {at::kFloat, at::kBFloat16}) {
    at::Tensor x = at::randn({1, 4, 6, 6}).to(type).contiguous(at::MemoryFormat::ChannelsLast);
    x[0][1][2][2] = std::nan("");
    x[0][2][0][0] = INFINITY;
    const Case s{1, 4, 6, 6, 3, 2, 1, 1, false};
    const at::Tensor got = pooled(x, s), want = at::max_pool2d(x, 3, 2, 1);
    EXPECT_EQ(got.isnan().sum().item<int64_t>(), want.isnan().sum().item<int64_t>());
    EXPECT_GT(got.isnan().sum().item<int64_t>(), 0);
    EXPECT_TRUE(at::equal(got.nan_to_num(), want.nan_to_num()));
  }
}

TEST(OneDnnMaxPool, BadArgumentsAreClearErrors) {
  const at::Tensor x = at::randn({1, 4, 8, 8});
  const auto fails_with = [&](const at::Tensor& input, const Case& s, const char* message) {
    try {
      pooled(input, s);
      ADD_FAILURE() << "no error for " << message;
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  fails_with(x.to(at::kDouble), {1, 4, 8, 8, 2, 2, 0, 1, false}, "float32 or bf16");
  fails_with(at::randn({4, 8, 8}), {1, 4, 8, 8, 2, 2, 0, 1, false}, "4-D");
  fails_with(x, {1, 4, 8, 8, 2, 2, 2, 1, false}, "at most half");
  fails_with(x, {1, 4, 8, 8, 2, 0, 0, 1, false}, "must be positive");
  fails_with(x, {1, 4, 8, 8, 9, 1, 0, 1, false}, "empty");
  at::Tensor wrong = at::empty({0}, at::kBFloat16);
  EXPECT_THROW(onednn_max_pool2d_out(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, wrong), c10::Error);
}

struct AverageCase {
  int64_t n, c, h, w, kernel, stride, padding;
  bool ceil_mode, include_padding;
};

TEST(OneDnnAvgPool, GivesAtensValuesInEveryLayoutAndType) {
  at::manual_seed(2);
  for (const AverageCase& s : {
           AverageCase{1, 64, 56, 56, 3, 1, 1, false, false},  // PoolFormer's token mixer
           AverageCase{1, 64, 56, 56, 3, 1, 1, false, true},   // the same, counting the padding
           AverageCase{2, 16, 7, 7, 2, 2, 0, false, true},     // DenseNet's transition, odd size
           AverageCase{2, 16, 7, 7, 2, 2, 0, true, false},     // ceil_mode: a last window of one
           AverageCase{1, 8, 10, 9, 3, 2, 1, true, false},     // ceil_mode and padding
           // ceil_mode's last window reaches past the padding: ATen divides by the cells up to
           // the padding's end, oneDNN by the kernel's size, so ATen's op runs inside.
           AverageCase{1, 8, 6, 6, 3, 2, 1, true, true},
           AverageCase{3, 5, 4, 4, 4, 4, 0, false, false},  // one output pixel, few channels
       }) {
    SCOPED_TRACE(::testing::Message()
                 << s.n << "x" << s.c << "x" << s.h << "x" << s.w << " k" << s.kernel << " s"
                 << s.stride << " p" << s.padding << (s.ceil_mode ? " ceil" : "")
                 << (s.include_padding ? " counting the padding" : ""));
    for (const auto type : {at::kFloat, at::kBFloat16}) {
      for (const auto format : {at::MemoryFormat::ChannelsLast, at::MemoryFormat::Contiguous}) {
        const at::Tensor x = at::randn({s.n, s.c, s.h, s.w}).to(type).contiguous(format);
        const at::Tensor want =
            at::avg_pool2d(x, s.kernel, s.stride, s.padding, s.ceil_mode, s.include_padding);
        at::Tensor got = at::empty({0}, x.options());
        onednn_avg_pool2d_out(x, {s.kernel, s.kernel}, {s.stride, s.stride}, {s.padding, s.padding},
                              s.ceil_mode, s.include_padding, got);
        ASSERT_EQ(got.sizes(), want.sizes());
        EXPECT_EQ(got.scalar_type(), type);
        EXPECT_TRUE(got.is_contiguous(format));
        // float32: a few roundings of a sum of at most 16 values; bf16: one bf16 rounding apart.
        const double tolerance = type == at::kFloat ? 1e-6 : 8e-3;
        EXPECT_TRUE(at::allclose(got.to(at::kFloat), want.to(at::kFloat), tolerance, tolerance))
            << (got.to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
      }
    }
  }
}

TEST(OneDnnAvgPool, PropagatesNansAndRejectsBadArguments) {
  at::Tensor x = at::randn({1, 4, 6, 6}).contiguous(at::MemoryFormat::ChannelsLast);
  x[0][1][2][2] = std::nan("");
  at::Tensor got = at::empty({0}, x.options());
  onednn_avg_pool2d_out(x, {3, 3}, {2, 2}, {1, 1}, false, false, got);
  const at::Tensor want = at::avg_pool2d(x, 3, 2, 1, false, false);
  EXPECT_TRUE(at::equal(got.isnan(), want.isnan()));
  EXPECT_GT(got.isnan().sum().item<int64_t>(), 0);
  try {
    onednn_avg_pool2d_out(x, {2, 2}, {2, 2}, {2, 2}, false, false, got);
    ADD_FAILURE() << "no error for a padding over half the kernel";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "kiln::onednn_avg_pool2d: padding must be at least 0 and at most half"),
              std::string::npos)
        << e.what();
  }
}

#else

TEST(OneDnnMaxPool, NotBuilt) {
  GTEST_SKIP() << "built without kiln's oneDNN (KILN_WITH_ONEDNN)";
}

#endif

}  // namespace
}  // namespace kiln
