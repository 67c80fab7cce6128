// share_folded_constant (backend/api/shared_constants.h): a constant folded to the bytes of one
// an earlier compile still holds is that tensor; anything else stays what it was.
#include "backend/api/shared_constants.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace kiln {
namespace {

constexpr int64_t kFloats = 2 * kMinSharedConstantBytes / sizeof(float);

// Values no other test folds (the table is the process's).
at::Tensor unique_values(int64_t floats = kFloats) {
  return at::randn({floats});
}

bool same_impl(const at::Tensor& a, const at::Tensor& b) {
  return a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl();
}

TEST(SharedConstants, TheSameBytesFoldedAgainAreTheEarlierTensor) {
  const at::Tensor first = share_folded_constant(unique_values());
  const int64_t shared_before = shared_constant_bytes();
  const at::Tensor again = share_folded_constant(first.clone());
  EXPECT_TRUE(same_impl(again, first));
  EXPECT_EQ(shared_constant_bytes() - shared_before, static_cast<int64_t>(first.nbytes()));
  // Packed weights are float vectors with a header; other dtypes and shapes share alike.
  const at::Tensor matrix =
      share_folded_constant(unique_values().reshape({128, -1}).to(at::kBFloat16));
  EXPECT_TRUE(same_impl(share_folded_constant(matrix.clone()), matrix));
}

TEST(SharedConstants, OneByteNoSampleReadsTellsThemApart) {
  const at::Tensor first = share_folded_constant(unique_values());
  at::Tensor other = first.clone();
  other.data_ptr<float>()[3] += 1;  // between the fingerprint's first two samples
  EXPECT_FALSE(same_impl(share_folded_constant(other), first));
}

TEST(SharedConstants, TheSameBytesUnderOtherMetadataStayApart) {
  const at::Tensor first = share_folded_constant(unique_values());
  // Each alone with its storage once the clone is gone, so each takes part.
  const at::Tensor as_ints = first.clone().view(at::kInt);
  EXPECT_TRUE(same_impl(share_folded_constant(as_ints), as_ints));
  const at::Tensor as_rows = first.clone().reshape({2, -1});
  EXPECT_TRUE(same_impl(share_folded_constant(as_rows), as_rows));
  const at::Tensor square = share_folded_constant(unique_values(256 * 256).reshape({256, 256}));
  const at::Tensor transposed = square.t().contiguous().t();  // other strides, other bytes order
  EXPECT_FALSE(same_impl(share_folded_constant(transposed), square));
}

TEST(SharedConstants, SmallTensorsViewsAndSlicesAreLeftAlone) {
  const at::Tensor small = unique_values(16);
  share_folded_constant(small);
  EXPECT_FALSE(same_impl(share_folded_constant(small.clone()), small));

  // A view shares its base's storage, whose owner may write it: never kept, never handed out.
  const at::Tensor weight = unique_values();
  const at::Tensor view = weight.view({2, -1});
  EXPECT_TRUE(same_impl(share_folded_constant(view), view));
  const at::Tensor copy = weight.clone().view({2, -1});
  EXPECT_TRUE(same_impl(share_folded_constant(copy), copy));

  // A fold that returns its input (contiguous() of a contiguous weight) returns the caller's
  // weight itself: never kept, never handed out.
  const at::Tensor callers = unique_values();
  EXPECT_TRUE(same_impl(share_folded_constant(callers, {callers}), callers));
  const at::Tensor folded = callers.clone();
  EXPECT_TRUE(same_impl(share_folded_constant(folded), folded));

  const at::Tensor larger = unique_values(2 * kFloats);
  const at::Tensor slice = larger.narrow(0, kFloats, kFloats).clone();
  share_folded_constant(slice);
  EXPECT_FALSE(same_impl(share_folded_constant(larger.narrow(0, kFloats, kFloats)), slice));
}

TEST(SharedConstants, ATensorNoCompileHoldsIsNotHandedOut) {
  at::Tensor values = unique_values();
  const at::Tensor copy = values.clone();
  const void* first_impl = share_folded_constant(values).unsafeGetTensorImpl();
  values.reset();  // the only holder: its storage is freed, the table's reference expires
  const at::Tensor again = share_folded_constant(copy);
  EXPECT_TRUE(same_impl(again, copy));
  EXPECT_NE(static_cast<const void*>(again.unsafeGetTensorImpl()), first_impl);
}

}  // namespace
}  // namespace kiln
