// Storage dtypes of weights and KV cache, and their exact conversions to and from float32.
// bf16 -> f32 and f16 -> f32 are exact; f32 -> bf16/f16 round to nearest, ties to even
// (the IEEE default, and what PyTorch's .to(torch.bfloat16) does).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ditto {

enum class DType : uint8_t { kF32, kF16, kBF16 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // safetensors spelling: "F32", "F16", "BF16"

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                                      // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16 (half). Exact for every f16 value, subnormals included.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Loads element i of a buffer of dtype t as float32 (exact).
inline float load_as_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
  }
  return 0.0f;
}

}  // namespace ditto
