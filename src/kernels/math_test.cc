// exp_f32 / log_f32 / silu_f32 (kernels/math.h) against double-precision libm. The header promises
// ≤ 2 ulp from the correctly rounded result; these tests measure the error over a dense sweep of
// every input range that matters and print the measured maximum.
#include "kernels/math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "kernels/kernel_test_util.h"

namespace ditto {
namespace {

using test::bits_of;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Spacing of float32 numbers in the binade of |v| (2^-149 for subnormals, 2^104 at the top).
double float_ulp_at(double v) {
  int e;
  std::frexp(std::min(std::fabs(v), 0x1.fffffep127), &e);  // |v| = f·2^e, f in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, -126) - 23);
}

// |got − want| in ulps of float32 at `want` (libm in double; its own error, < 1 ulp of double, is
// 2^-29 float ulps and ignored). Values beyond FLT_MAX count as 2^128, so inf for a result that
// overflows is 0 ulp and inf for one that does not is ≥ 1 ulp of the top binade.
double ulp_error(float got, double want) {
  const double g = std::isinf(got) ? std::copysign(0x1p128, got) : got;
  const double w = std::fabs(want) > 0x1p128 ? std::copysign(0x1p128, want) : want;
  return std::fabs(g - w) / float_ulp_at(w);
}

struct MaxError {
  double ulp = 0.0;
  float at = 0.0f;
  int64_t count = 0;
  void add(float x, double err) {
    ++count;
    if (err > ulp || std::isnan(err)) {
      ulp = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
      at = x;
    }
  }
};

MaxError sweep_exp(uint32_t first_bits, uint32_t last_bits, uint32_t step, bool negative) {
  MaxError m;
  for (uint64_t b = first_bits; b <= last_bits; b += step) {
    float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    if (negative) x = -x;
    m.add(x, ulp_error(exp_f32(x), std::exp(static_cast<double>(x))));
  }
  return m;
}

MaxError sweep_log(uint32_t first_bits, uint32_t last_bits, uint32_t step) {
  MaxError m;
  for (uint64_t b = first_bits; b <= last_bits; b += step) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(b));
    m.add(x, ulp_error(log_f32(x), std::log(static_cast<double>(x))));
  }
  return m;
}

void report(const char* what, const MaxError& m) {
  std::printf("[ measured ] %s: max error %.3f ulp at x = %.9g (0x%08x), %lld inputs\n", what, m.ulp, m.at,
              bits_of(m.at), static_cast<long long>(m.count));
}

TEST(MathTest, ExpWithinTwoUlpOverDenseSweep) {
  // Every 97th float with |x| ≤ 104 covers every binade of the input from the smallest subnormal
  // up to past the overflow (≈ 88.72) and underflow-to-zero (≈ −103.97) thresholds.
  const uint32_t k104 = bits_of(104.0f);
  const MaxError pos = sweep_exp(0, k104, 97, false);
  const MaxError neg = sweep_exp(0, k104, 97, true);
  // Every float whose exp is subnormal (x in [−103.98, −87.33]): the final scaling must round once.
  const MaxError sub = sweep_exp(bits_of(87.33f), bits_of(103.98f), 1, true);
  // Rounding once there means: error ≤ 0.5 ulp (2^-149) plus the polynomial's error before the
  // rounding, which is below one normal ulp (2^-23 relative; the sweeps above measure < 0.92 ulp in
  // total) and so below v/2^-126 subnormal ulps. A second rounding (e.g. scaling to 2v, rounding,
  // then halving) adds up to 0.25 ulp on top and fails this for the small subnormals.
  double worst_excess = -1.0;
  float worst_excess_at = 0.0f;
  for (uint32_t b = bits_of(87.33f); b <= bits_of(103.98f); ++b) {
    const float x = -std::bit_cast<float>(b);
    const double want = std::exp(static_cast<double>(x));
    const double excess = std::fabs(exp_f32(x) - want) / 0x1p-149 - want / 0x1p-126;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst_excess_at = x;
    }
  }
  std::printf("[ measured ] exp_f32 subnormal results: max (error − v/2^-126) = %.4f ulp at x = %.9g\n", worst_excess,
              worst_excess_at);
  EXPECT_LE(worst_excess, 0.5) << "at x = " << worst_excess_at;
  // Every float with 1/2 ≤ |x| ≤ 1: the reduced argument r = x − n·ln2 sweeps its whole range
  // [−ln2/2, ln2/2] at full density here (n = ±1 and 0), both rounding directions of n included.
  const MaxError unit = sweep_exp(bits_of(0.5f), bits_of(1.0f), 1, false);
  const MaxError unit_neg = sweep_exp(bits_of(0.5f), bits_of(1.0f), 1, true);
  report("exp_f32, x in [0, 104] step 97", pos);
  report("exp_f32, x in [-104, 0] step 97", neg);
  report("exp_f32, subnormal results, every float", sub);
  report("exp_f32, 1/2 <= |x| <= 1, every float",
         std::max(unit, unit_neg, [](auto& a, auto& b) { return a.ulp < b.ulp; }));
  EXPECT_LE(pos.ulp, 2.0) << "at x = " << pos.at;
  EXPECT_LE(neg.ulp, 2.0) << "at x = " << neg.at;
  EXPECT_LE(sub.ulp, 2.0) << "at x = " << sub.at;
  EXPECT_LE(unit.ulp, 2.0) << "at x = " << unit.at;
  EXPECT_LE(unit_neg.ulp, 2.0) << "at x = " << unit_neg.at;
}

TEST(MathTest, LogWithinTwoUlpOverDenseSweep) {
  // Every 97th positive finite float, subnormal inputs included, and every float in [0.5, 2),
  // where log is near zero and its relative accuracy is hardest.
  const MaxError all = sweep_log(1, bits_of(std::numeric_limits<float>::max()), 97);
  const MaxError sub = sweep_log(1, bits_of(std::numeric_limits<float>::min()) - 1, 13);
  const MaxError near_one = sweep_log(bits_of(0.5f), bits_of(2.0f) - 1, 1);
  report("log_f32, all positive floats step 97", all);
  report("log_f32, subnormal inputs step 13", sub);
  report("log_f32, x in [0.5, 2), every float", near_one);
  EXPECT_LE(all.ulp, 2.0) << "at x = " << all.at;
  EXPECT_LE(sub.ulp, 2.0) << "at x = " << sub.at;
  EXPECT_LE(near_one.ulp, 2.0) << "at x = " << near_one.at;
}

TEST(MathTest, ExpSpecialValues) {
  EXPECT_EQ(bits_of(exp_f32(0.0f)), bits_of(1.0f));
  EXPECT_EQ(bits_of(exp_f32(-0.0f)), bits_of(1.0f));
  EXPECT_EQ(exp_f32(kInf), kInf);
  EXPECT_EQ(bits_of(exp_f32(-kInf)), 0u);  // +0: online softmax relies on exp(−inf − m) = 0
  EXPECT_TRUE(std::isnan(exp_f32(kNaN)));
  EXPECT_TRUE(std::isnan(exp_f32(-kNaN)));
  EXPECT_EQ(exp_f32(std::numeric_limits<float>::max()), kInf);
  EXPECT_EQ(bits_of(exp_f32(-std::numeric_limits<float>::max())), 0u);
  EXPECT_EQ(bits_of(exp_f32(std::numeric_limits<float>::denorm_min())), bits_of(1.0f));

  // Overflow threshold: the largest x whose exp rounds to a finite float (exp(x) below
  // 2^128·(1 − 2^-25), the midpoint between FLT_MAX and 2^128) must stay finite, the next float
  // must be inf.
  const double overflow = 0x1p128 * (1.0 - 0x1p-25);
  float x_hi = 88.0f;
  while (std::exp(static_cast<double>(std::nextafter(x_hi, kInf))) < overflow) x_hi = std::nextafter(x_hi, kInf);
  std::printf("[ measured ] exp overflow threshold: exp_f32(%.9g) = %.9g, exp_f32(%.9g) = %g\n", x_hi, exp_f32(x_hi),
              std::nextafter(x_hi, kInf), exp_f32(std::nextafter(x_hi, kInf)));
  EXPECT_TRUE(std::isfinite(exp_f32(x_hi))) << x_hi;
  EXPECT_LE(ulp_error(exp_f32(x_hi), std::exp(static_cast<double>(x_hi))), 2.0);
  EXPECT_EQ(exp_f32(std::nextafter(x_hi, kInf)), kInf);

  // Underflow threshold: exp(x) > 2^-150 (half the smallest subnormal) rounds to 2^-149, exp(x) <
  // 2^-150 rounds to +0. Both neighbours of ln(2^-150) are ≈ 7e-7 relative away from the midpoint,
  // far more than the polynomial's error, so a result that rounds once is exact here.
  float x_lo = -103.0f;
  while (std::exp(static_cast<double>(std::nextafter(x_lo, -kInf))) > 0x1p-150) x_lo = std::nextafter(x_lo, -kInf);
  EXPECT_EQ(exp_f32(x_lo), std::numeric_limits<float>::denorm_min()) << x_lo;
  EXPECT_EQ(bits_of(exp_f32(std::nextafter(x_lo, -kInf))), 0u) << std::nextafter(x_lo, -kInf);
  EXPECT_EQ(bits_of(exp_f32(-104.0f)), 0u);
  // The smallest normal result and the largest subnormal are reached through the two-step scaling.
  for (float x : {-87.3365479f, -87.3365555f, -87.34f, -100.0f})
    EXPECT_LE(ulp_error(exp_f32(x), std::exp(static_cast<double>(x))), 2.0) << x;
}

TEST(MathTest, LogSpecialValues) {
  EXPECT_EQ(bits_of(log_f32(1.0f)), 0u);  // +0 exactly
  EXPECT_EQ(log_f32(0.0f), -kInf);
  EXPECT_EQ(log_f32(-0.0f), -kInf);
  EXPECT_EQ(log_f32(kInf), kInf);
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(-kInf)));
  EXPECT_TRUE(std::isnan(log_f32(-std::numeric_limits<float>::denorm_min())));
  EXPECT_TRUE(std::isnan(log_f32(kNaN)));
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  const float flt_min = std::numeric_limits<float>::min();
  const float flt_max = std::numeric_limits<float>::max();
  for (float x : {denorm_min, 2 * denorm_min, std::nextafter(flt_min, 0.0f), flt_min, flt_max, 2.0f, 0.5f,
                  std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f), 1.41421354f, 1.41421366f, 0.707106769f}) {
    EXPECT_LE(ulp_error(log_f32(x), std::log(static_cast<double>(x))), 2.0) << x;
  }
}

TEST(MathTest, SiluSpecialValuesAndAccuracy) {
  EXPECT_EQ(bits_of(silu_f32(0.0f)), 0u);
  EXPECT_EQ(silu_f32(kInf), kInf);
  EXPECT_EQ(silu_f32(100.0f), 100.0f);  // exp(−100) is far below half an ulp of 1
  EXPECT_TRUE(std::isnan(silu_f32(kNaN)));
  // silu(g) = g/(1 + e^-g): exp ≤ 2 ulp (≤ 4u relative) perturbs the denominator by ≤ 4u·e/(1+e),
  // the add and the division round once each: ≤ 6u relative to first order. Checked on every
  // 97th float with |g| ≤ 88 (beyond, e^-g overflows and silu returns −0 for a true value below
  // 1e-36, as PyTorch's x/(1+exp(−x)) does in float32).
  double max_rel = 0.0;
  const uint32_t k88 = bits_of(88.0f);
  for (uint32_t b = 1; b <= k88; b += 97) {
    for (float g : {std::bit_cast<float>(b), -std::bit_cast<float>(b)}) {
      const double want = g / (1.0 + std::exp(-static_cast<double>(g)));
      const double err = std::fabs(silu_f32(g) - want);
      // A subnormal result (tiny g: silu(g) ≈ g/2) rounds with absolute error ≤ 2^-150 instead.
      ASSERT_LE(err, 6.01 * test::kU * std::fabs(want) + 0x1p-150) << "g = " << g;
      if (std::fabs(want) >= 0x1p-126) max_rel = std::max(max_rel, err / std::fabs(want));
    }
  }
  std::printf("[ measured ] silu_f32 max relative error %.3f u (bound 6 u)\n", max_rel / test::kU);
}

}  // namespace
}  // namespace ditto
