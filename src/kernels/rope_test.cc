// Rotary position embedding. Contract (rope.h): cos/sin of p·θ_i computed in double and rounded to
// float32 once (a function of p alone); y[i] = x[i]·c − x[i+d/2]·s, y[i+d/2] = x[i+d/2]·c + x[i]·s as
// two float32 products and one add. Checked as bits against that sentence, token alone vs inside
// random batches, and for correctness against Hugging Face's rotate_half formulation in long double.
#include "kernels/rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;

// Hugging Face's default rotary frequencies: inv_freq[i] = 1 / theta^(2i/d).
std::vector<double> inv_freq_for(int64_t head_dim, double theta) {
  std::vector<double> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
  return f;
}

TEST(RopeTest, CosSinAreDoubleValuesRoundedOnce) {
  Rng rng(30);
  for (int64_t head_dim : {64, 128}) {
    const std::vector<double> inv_freq = inv_freq_for(head_dim, 1e6);
    const int64_t half = head_dim / 2;
    std::vector<int32_t> positions = {0, 1, 2, 31, 32, 4095, 40959, 131071};
    for (int i = 0; i < 20; ++i) positions.push_back(static_cast<int32_t>(rng.uniform_int(0, 200000)));
    const int64_t num_tokens = static_cast<int64_t>(positions.size());
    std::vector<float> cs(static_cast<size_t>(num_tokens * head_dim));
    rope_cos_sin(positions.data(), num_tokens, inv_freq, cs.data());
    for (int64_t t = 0; t < num_tokens; ++t) {
      std::vector<float> want(static_cast<size_t>(head_dim));
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[t]) * inv_freq[i];
        want[i] = static_cast<float>(std::cos(angle));
        want[half + i] = static_cast<float>(std::sin(angle));
        // Against long double: float rounding (≤ u relative), double cos/sin (≤ 1 ulp of double)
        // and the rounding of the angle p·θ in double (≤ |angle|·2^-53 absolute, amplified by at
        // most 1 through cos/sin).
        const long double a = static_cast<long double>(positions[t]) * inv_freq[i];
        const long double c = std::cos(a), s = std::sin(a);
        const double slack = std::fabs(static_cast<double>(a)) * 0x1p-53 + 0x1p-70;
        EXPECT_LE(std::fabs(cs[t * head_dim + i] - static_cast<double>(c)),
                  (test::kU + 0x1p-52) * std::fabs(static_cast<double>(c)) + slack);
        EXPECT_LE(std::fabs(cs[t * head_dim + half + i] - static_cast<double>(s)),
                  (test::kU + 0x1p-52) * std::fabs(static_cast<double>(s)) + slack);
      }
      ASSERT_TRUE(BitsEqual(want.data(), cs.data() + t * head_dim, head_dim))
          << "position " << positions[t] << " head_dim " << head_dim;
    }
    // Position 0: cos = 1, sin = +0 exactly.
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_EQ(cs[i], 1.0f);
      EXPECT_EQ(test::bits_of(cs[half + i]), 0u);
    }
  }
}

TEST(RopeTest, ApplyMatchesContractBitwise) {
  Rng rng(31);
  for (int64_t head_dim : {2, 64, 128}) {
    const std::vector<double> inv_freq = inv_freq_for(head_dim, 1e6);
    const int64_t half = head_dim / 2;
    for (int rep = 0; rep < 20; ++rep) {
      const int32_t pos = static_cast<int32_t>(rng.uniform_int(0, 40960));
      std::vector<float> cs(static_cast<size_t>(head_dim));
      rope_cos_sin(&pos, 1, inv_freq, cs.data());
      const int64_t num_heads = rng.uniform_int(1, 8);
      std::vector<float> x = rng.normal_vector(static_cast<size_t>(num_heads * head_dim));
      std::vector<float> want(x.size());
      for (int64_t h = 0; h < num_heads; ++h) {
        const float* v = x.data() + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half], c = cs[i], s = cs[half + i];
          want[h * head_dim + i] = a * c - b * s;
          want[h * head_dim + i + half] = b * c + a * s;
        }
      }
      rope_apply(x.data(), num_heads, head_dim, cs.data());
      ASSERT_TRUE(BitsEqual(want, x)) << "head_dim " << head_dim << " position " << pos;
    }
  }
}

TEST(RopeTest, TokenAloneEqualsTokenInsideRandomBatches) {
  Rng rng(32);
  const int64_t head_dim = 128;
  const int64_t num_heads = 4;
  const int64_t row = num_heads * head_dim;
  const std::vector<double> inv_freq = inv_freq_for(head_dim, 1e6);
  for (int trial = 0; trial < 30; ++trial) {
    const int32_t pos0 = static_cast<int32_t>(rng.uniform_int(0, 40960));
    const std::vector<float> x0 = rng.normal_vector(static_cast<size_t>(row));
    std::vector<float> cs0(static_cast<size_t>(head_dim));
    rope_cos_sin(&pos0, 1, inv_freq, cs0.data());
    std::vector<float> y0 = x0;
    rope_apply(y0.data(), num_heads, head_dim, cs0.data());
    for (int rep = 0; rep < 5; ++rep) {
      const int64_t num_tokens = rng.uniform_int(1, 70);
      const int64_t index = rng.uniform_int(0, num_tokens - 1);
      std::vector<int32_t> positions(static_cast<size_t>(num_tokens));
      for (int32_t& p : positions) p = static_cast<int32_t>(rng.uniform_int(0, 40960));
      positions[index] = pos0;
      std::vector<float> cs(static_cast<size_t>(num_tokens * head_dim));
      rope_cos_sin(positions.data(), num_tokens, inv_freq, cs.data());
      ASSERT_TRUE(BitsEqual(cs0.data(), cs.data() + index * head_dim, head_dim))
          << "cos/sin, batch " << num_tokens << " index " << index;
      std::vector<float> x = rng.normal_vector(static_cast<size_t>(num_tokens * row));
      std::memcpy(x.data() + index * row, x0.data(), sizeof(float) * row);
      for (int64_t t = 0; t < num_tokens; ++t)
        rope_apply(x.data() + t * row, num_heads, head_dim, cs.data() + t * head_dim);
      ASSERT_TRUE(BitsEqual(y0.data(), x.data() + index * row, row)) << "batch " << num_tokens << " index " << index;
    }
  }
}

TEST(RopeTest, MatchesRotateHalfReference) {
  // Hugging Face: emb = cat(freqs, freqs); q·cos(emb) + rotate_half(q)·sin(emb), rotate_half(q) =
  // cat(−q2, q1), in long double with exact cos/sin. Error of y = a·ĉ − b·ŝ: ĉ, ŝ carry
  // ≤ (u + 2^-52) relative plus ≤ |angle|·2^-53 absolute (angle rounding), the two products and the
  // add round once each: |δy| ≤ 3u·(|a·c| + |b·s|) + (|a| + |b|)·|angle|·2^-53 to first order
  // (3.01 covers the rest).
  Rng rng(33);
  double worst = 0.0;  // in units of u·(|a·c| + |b·s|)
  for (int64_t head_dim : {64, 128}) {
    const std::vector<double> inv_freq = inv_freq_for(head_dim, 1e6);
    const int64_t half = head_dim / 2;
    for (int rep = 0; rep < 200; ++rep) {
      const int32_t pos = static_cast<int32_t>(rng.uniform_int(0, 131072));
      std::vector<float> cs(static_cast<size_t>(head_dim));
      rope_cos_sin(&pos, 1, inv_freq, cs.data());
      const std::vector<float> x = rng.normal_vector(static_cast<size_t>(head_dim));
      std::vector<float> y = x;
      rope_apply(y.data(), 1, head_dim, cs.data());
      for (int64_t i = 0; i < head_dim; ++i) {
        const int64_t f = i % half;  // emb = cat(freqs, freqs)
        const long double angle = static_cast<long double>(pos) * inv_freq[f];
        const long double rot = i < half ? -static_cast<long double>(x[i + half]) : x[i - half];
        const long double want = x[i] * std::cos(angle) + rot * std::sin(angle);
        const double mag = std::fabs(static_cast<double>(x[i] * std::cos(angle))) +
                           std::fabs(static_cast<double>(rot * std::sin(angle)));
        const double tol = 3.01 * test::kU * mag + (std::fabs(x[i]) + std::fabs(static_cast<double>(rot))) *
                                                       (static_cast<double>(angle) * 0x1p-53 + 0x1p-70);
        const double err = std::fabs(static_cast<double>(y[i] - want));
        ASSERT_LE(err, tol) << "head_dim " << head_dim << " position " << pos << " i " << i;
        worst = std::max(worst, err / (test::kU * mag));
      }
    }
  }
  std::printf("[ measured ] rope max error %.3f u·(|a·c| + |b·s|) (bound 3 u)\n", worst);
}

}  // namespace
}  // namespace ditto
