#include "core/philox.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ditto {
namespace {

using Block = std::array<uint32_t, 4>;

// Known-answer vectors from Random123's tests/kat_vectors ("philox4x32 R ctr[4] key[2] -> out[4]").
TEST(Philox, Random123KnownAnswersZero) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, Random123KnownAnswersAllOnes) {
  const uint32_t f = 0xffffffffu;
  EXPECT_EQ(philox4x32_10({f, f, f, f}, {f, f}), (Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, Random123KnownAnswersPiDigits) {
  const Block ctr{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  EXPECT_EQ(philox4x32_10(ctr, {0xa4093822u, 0x299f31d0u}),
            (Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
  // The 7-round variant of the same vector checks the round count is a real parameter.
  EXPECT_EQ(philox4x32<7>(ctr, {0xa4093822u, 0x299f31d0u}),
            (Block{0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}));
}

TEST(Philox, IsConstexprAndPure) {
  constexpr Block a = philox4x32_10({1, 2, 3, 4}, {5, 6});
  EXPECT_EQ(a, philox4x32_10({1, 2, 3, 4}, {5, 6}));
  EXPECT_NE(a, philox4x32_10({1, 2, 3, 5}, {5, 6}));
  EXPECT_NE(a, philox4x32_10({1, 2, 3, 4}, {5, 7}));
}

TEST(Philox, UniformsAreInRange) {
  EXPECT_EQ(philox_uniform(0), 0.0);
  EXPECT_LT(philox_uniform(0xffffffffu), 1.0);
  EXPECT_GT(philox_uniform_open0(0), 0.0);
  EXPECT_EQ(philox_uniform_open0(0xffffffffu), 1.0);
}

TEST(Philox, OutputLooksUniform) {
  // A cheap sanity check on the distribution: mean of 400k uniforms is 0.5 within 5 sigma.
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    for (uint32_t w : philox4x32_10({static_cast<uint32_t>(i), 0, 0, 0}, {42, 0})) {
      sum += philox_uniform(w);
    }
  }
  const double mean = sum / (4.0 * n);
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / (4.0 * n)));
}

}  // namespace
}  // namespace ditto
