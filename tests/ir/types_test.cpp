#include <vector>

#include <gtest/gtest.h>

#include "passes/ir/types.h"

namespace kiln::ir {
namespace {

TensorType strided(DType dtype, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  TensorType type;
  type.dtype = dtype;
  type.sizes = std::move(sizes);
  type.strides = std::move(strides);
  return type;
}

constexpr DType kAllDTypes[] = {
    DType::Bool,    DType::UInt8,   DType::Int8,      DType::Int16,
    DType::Int32,   DType::Int64,   DType::Float16,   DType::BFloat16,
    DType::Float32, DType::Float64, DType::Complex64, DType::Complex128,
};

TEST(TypesTest, ContiguousStridesAreRowMajor) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), (std::vector<int64_t>{}));
}

TEST(TypesTest, ContiguousStridesTreatZeroSizesAsOne) {
  EXPECT_EQ(contiguous_strides({3, 0, 2}), (std::vector<int64_t>{2, 2, 1}));
}

TEST(TypesTest, MakeContiguousIsContiguous) {
  EXPECT_TRUE(make_contiguous(DType::Float32, {2, 3, 4}).is_contiguous());
}

TEST(TypesTest, TransposeIsNotContiguous) {
  EXPECT_FALSE(strided(DType::Float32, {3, 2}, {1, 3}).is_contiguous());
}

TEST(TypesTest, SizeOneDimsMayHaveAnyStride) {
  EXPECT_TRUE(strided(DType::Float32, {2, 1, 3}, {3, 99, 1}).is_contiguous());
}

TEST(TypesTest, EmptyTensorIsContiguous) {
  EXPECT_TRUE(strided(DType::Float32, {0, 3}, {7, 5}).is_contiguous());
}

TEST(TypesTest, PermutedStridesAreDenseButNotContiguous) {
  // NCHW sizes with channels-last strides.
  TensorType channels_last = strided(DType::Float32, {2, 3, 4, 5}, {60, 1, 15, 3});
  EXPECT_FALSE(channels_last.is_contiguous());
  EXPECT_TRUE(channels_last.is_non_overlapping_and_dense());
}

TEST(TypesTest, BroadcastStridesOverlap) {
  EXPECT_FALSE(strided(DType::Float32, {2, 3}, {0, 1}).is_non_overlapping_and_dense());
}

TEST(TypesTest, SlicedStridesHaveGaps) {
  EXPECT_FALSE(strided(DType::Float32, {2, 3}, {6, 1}).is_non_overlapping_and_dense());
}

TEST(TypesTest, SizeOneDimsDoNotBreakDenseness) {
  EXPECT_TRUE(strided(DType::Float32, {3, 1, 2}, {1, 1, 3}).is_non_overlapping_and_dense());
}

TEST(TypesTest, StorageBytesOfContiguousTensor) {
  EXPECT_EQ(make_contiguous(DType::Float32, {2, 3}).storage_bytes(), 24);
  EXPECT_EQ(make_contiguous(DType::Complex128, {5}).storage_bytes(), 80);
}

TEST(TypesTest, StorageBytesSpanGaps) {
  // Last element at offset 1*6 + 2*1 = 8, so 9 elements are addressed.
  EXPECT_EQ(strided(DType::Float32, {2, 3}, {6, 1}).storage_bytes(), 36);
}

TEST(TypesTest, StorageBytesOfScalarAndEmpty) {
  EXPECT_EQ(make_contiguous(DType::Int64, {}).storage_bytes(), 8);
  EXPECT_EQ(make_contiguous(DType::Int64, {4, 0}).storage_bytes(), 0);
}

TEST(TypesTest, DTypeNamesRoundTrip) {
  for (DType dtype : kAllDTypes) {
    auto parsed = parse_dtype(dtype_name(dtype));
    ASSERT_TRUE(parsed.has_value()) << dtype_name(dtype);
    EXPECT_EQ(*parsed, dtype) << dtype_name(dtype);
  }
}

TEST(TypesTest, DTypeNamesAreDistinct) {
  for (DType a : kAllDTypes) {
    for (DType b : kAllDTypes) {
      if (a != b) {
        EXPECT_STRNE(dtype_name(a), dtype_name(b));
      }
    }
  }
}

TEST(TypesTest, UnknownDTypeName) {
  EXPECT_FALSE(parse_dtype("f33").has_value());
  EXPECT_FALSE(parse_dtype("float32").has_value());
}

TEST(TypesTest, DeviceNamesRoundTrip) {
  for (Device device :
       {Device{DeviceKind::CPU, -1}, Device{DeviceKind::CPU, 0}, Device{DeviceKind::CUDA, -1},
        Device{DeviceKind::CUDA, 3}, Device{DeviceKind::Meta, -1}}) {
    auto parsed = parse_device(device_name(device));
    ASSERT_TRUE(parsed.has_value()) << device_name(device);
    EXPECT_EQ(*parsed, device) << device_name(device);
  }
}

TEST(TypesTest, DeviceNameSpelling) {
  EXPECT_EQ(device_name(Device{DeviceKind::CUDA, 1}), "cuda:1");
  EXPECT_EQ(device_name(Device{DeviceKind::Meta, -1}), "meta");
}

TEST(TypesTest, BadDeviceNames) {
  for (const char* name : {"gpu", "cuda:", "cuda:x", ":0", "cuda:-1", ""}) {
    EXPECT_FALSE(parse_device(name).has_value()) << name;
  }
}

TEST(TypesTest, TypeStringShowsStridesOnlyWhenNotContiguous) {
  EXPECT_EQ(type_string(make_contiguous(DType::Float32, {2, 3})), "f32[2,3]");
  EXPECT_EQ(type_string(strided(DType::Float32, {3, 2}, {1, 3})), "f32[3,2]{1,3}");
}

TEST(TypesTest, TypeStringShowsNonDefaultDevice) {
  EXPECT_EQ(type_string(make_contiguous(DType::Int64, {}, Device{DeviceKind::CUDA, 0})),
            "i64[]@cuda:0");
}

}  // namespace
}  // namespace kiln::ir
