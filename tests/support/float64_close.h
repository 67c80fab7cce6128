// A float32 result against a float64 reference, for the tests of kiln's oneDNN and Winograd ops:
// unit-scale inputs, so sums taken in another order than float64's differ by ~1e-6.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

namespace kiln::testing {

/// `got` within `relative` x (1 + max |want|) of `want` everywhere, with the same sizes.
inline void expect_close(const at::Tensor& got, const at::Tensor& want, double relative = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const double error = (got.to(at::kDouble) - want).abs().max().item<double>();
  EXPECT_LE(error, relative * (1 + want.abs().max().item<double>())) << "at sizes " << want.sizes();
}

}  // namespace kiln::testing
