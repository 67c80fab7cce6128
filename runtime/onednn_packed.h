#pragma once

// The weights kiln's oneDNN ops read (runtime/onednn_conv.h, runtime/onednn_linear.h), packed at
// compile time: a float32 vector holding a 64-byte header (the layout's identity, its size in
// bytes) and then the weight in the blocked layout the op's primitive reads.

#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln {

inline constexpr int64_t kPackedHeaderFloats = 16;

/// An op's `precision` argument: "fp32", or "bf16" (multiply in bf16, sum in float32: the weight
/// is packed in bf16 and the input converted on each call).
inline bool multiplies_in_bf16(std::string_view precision, const char* op) {
  if (precision == "fp32") return false;
  TORCH_CHECK(precision == "bf16", op, ": precision must be \"fp32\" or \"bf16\", got \"",
              precision, "\"");
  return true;
}

struct PackedHeader {
  uint64_t layout;
  uint64_t bytes;
};

/// `dense` packed for `primitive` (a ConvPrimitive or MatmulPrimitive).
template <class Primitive>
at::Tensor pack_for(const Primitive& primitive, const at::Tensor& dense) {
  const PackedHeader header{primitive.packed_weight_layout(), primitive.packed_weight_bytes()};
  const int64_t floats = kPackedHeaderFloats + static_cast<int64_t>((header.bytes + 3) / 4);
  at::Tensor packed = at::zeros({floats}, dense.options());
  std::memcpy(packed.data_ptr<float>(), &header, sizeof header);
  const at::Tensor contiguous = dense.contiguous();
  primitive.pack_weight(contiguous.const_data_ptr<float>(),
                        packed.data_ptr<float>() + kPackedHeaderFloats);
  return packed;
}

/// The weight `primitive` reads: `packed`'s, where it was packed for this primitive's layout;
/// else `dense` packed again into `repacked` (a weight packed for another thread count, which
/// oneDNN blocks otherwise).
template <class Primitive>
const void* packed_weight_for(const Primitive& primitive, const at::Tensor& packed,
                              const at::Tensor& dense, at::Tensor& repacked, const char* op) {
  TORCH_CHECK(packed.dim() == 1 && packed.scalar_type() == at::kFloat && packed.is_contiguous() &&
                  packed.numel() >= kPackedHeaderFloats,
              op, ": packed must be the weight its _weight op packed, got ", packed.sizes(), " ",
              packed.scalar_type());
  PackedHeader header;
  std::memcpy(&header, packed.const_data_ptr<float>(), sizeof header);
  TORCH_CHECK(static_cast<uint64_t>(packed.numel() - kPackedHeaderFloats) * 4 >= header.bytes, op,
              ": packed is shorter than its header says");
  if (header.layout == primitive.packed_weight_layout()) {
    return packed.const_data_ptr<float>() + kPackedHeaderFloats;
  }
  repacked =
      at::empty({static_cast<int64_t>((primitive.packed_weight_bytes() + 3) / 4)}, dense.options());
  primitive.pack_weight(dense.contiguous().const_data_ptr<float>(), repacked.data_ptr<float>());
  return repacked.const_data_ptr<float>();
}

}  // namespace kiln
