#include "core/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ditto {
namespace {

// Independent reference: round to the nearest representable value of `bits` mantissa bits by
// exhaustive search over the two neighbours (computed in double), ties to even.
TEST(DTypeTest, Bf16RoundTripIsExactForEveryBf16Value) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(DTypeTest, F16RoundTripIsExactForEveryF16Value) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(DTypeTest, F16DecodesKnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
}

// Rounding of values between representable neighbours, checked against a double-precision
// midpoint computation (an independent formulation of round-to-nearest-even).
TEST(DTypeTest, RoundingMatchesNearestEven) {
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float f = std::bit_cast<float>((state & 0x3fffffffu) | ((state & 1u) << 31));
    if (!std::isfinite(f)) continue;
    // bf16
    const uint16_t b = f32_to_bf16(f);
    const double lo = bf16_to_f32(static_cast<uint16_t>((std::bit_cast<uint32_t>(f) >> 16)));
    const double hi = bf16_to_f32(static_cast<uint16_t>((std::bit_cast<uint32_t>(f) >> 16) + 1));
    const double dl = std::fabs(f - lo), dh = std::fabs(f - hi);
    const double expect = dl < dh ? lo : dh < dl ? hi : (((std::bit_cast<uint32_t>(f) >> 16) & 1) ? hi : lo);
    EXPECT_EQ(static_cast<double>(bf16_to_f32(b)), expect) << f;
    // f16: compare against double rounding through the decoded neighbours.
    if (std::fabs(f) < 65504.0f) {
      const float r = f16_to_f32(f32_to_f16(f));
      EXPECT_LE(std::fabs(static_cast<double>(r) - f),
                std::fabs(static_cast<double>(f16_to_f32(static_cast<uint16_t>(f32_to_f16(f) ^ 1))) - f))
          << f;
    }
  }
}

}  // namespace
}  // namespace ditto
