// SwiGLU and GELU(tanh)·up. Contract (activation.h): out[t, i] = silu(gate[t, i])·up[t, i], silu(g) = g/(1 +
// exp_f32(−g)), elementwise. Checked as bits against that sentence, row alone vs inside random batches (with row
// strides), and for correctness against double.
#include "kernels/activation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/math.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;

// gate_up row [2n]: gates then ups; values spread over [−12, 12] plus a few extreme gates.
std::vector<float> random_gate_up(Rng& rng, int64_t rows, int64_t ld) {
  std::vector<float> v = rng.normal_vector(static_cast<size_t>(rows * ld), 4.0f);
  for (float& x : v)
    if (rng.next() % 64 == 0) x = rng.uniform(-88.0f, 88.0f);
  return v;
}

TEST(ActivationTest, SiluMulMatchesContractBitwise) {
  Rng rng(40);
  for (int64_t n : {1, 5, 16, 17, 300}) {
    const int64_t rows = 3;
    const int64_t ld = 2 * n + 1;
    const int64_t ldo = n + 2;
    const std::vector<float> gu = random_gate_up(rng, rows, ld);
    std::vector<float> out(static_cast<size_t>(rows * ldo), std::nanf(""));
    silu_mul(gu.data(), rows, n, ld, out.data(), ldo);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const float g = gu[r * ld + i];
        want[i] = (g / (1.0f + exp_f32(-g))) * gu[r * ld + n + i];
      }
      ASSERT_TRUE(BitsEqual(want.data(), out.data() + r * ldo, n)) << "n=" << n << " row " << r;
      for (int64_t i = n; i < ldo; ++i) ASSERT_TRUE(std::isnan(out[r * ldo + i])) << "wrote past n";
    }
  }
}

// GELU(tanh): bits against activation.h's sentence (math.h's gelu_tanh_f32 written out), and the
// value against PyTorch's formula 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) in double.
TEST(ActivationTest, GeluTanhMulMatchesContractBitwiseAndDouble) {
  Rng rng(42);
  for (int64_t n : {1, 5, 16, 17, 300}) {
    const int64_t rows = 3;
    const int64_t ld = 2 * n + 1;
    const int64_t ldo = n + 2;
    const std::vector<float> gu = random_gate_up(rng, rows, ld);
    std::vector<float> out(static_cast<size_t>(rows * ldo), std::nanf(""));
    gelu_tanh_mul(gu.data(), rows, n, ld, out.data(), ldo);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const float g = gu[r * ld + i];
        const float u = g * (1.59576917f + 0.0713548139f * (g * g));
        want[i] = (g / (1.0f + exp_f32(-u))) * gu[r * ld + n + i];
        const double x = g;
        const double ref = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x))) *
                           gu[r * ld + n + i];
        ASSERT_NEAR(want[i], ref, 2e-6 * (std::fabs(ref) + std::fabs(x * gu[r * ld + n + i])) + 1e-37) << "g=" << g;
      }
      ASSERT_TRUE(BitsEqual(want.data(), out.data() + r * ldo, n)) << "n=" << n << " row " << r;
      for (int64_t i = n; i < ldo; ++i) ASSERT_TRUE(std::isnan(out[r * ldo + i])) << "wrote past n";
    }
  }
}

TEST(ActivationTest, RowAloneEqualsRowInsideRandomBatches) {
  Rng rng(41);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = rng.uniform_int(1, 400);
    const std::vector<float> row0 = random_gate_up(rng, 1, 2 * n);
    std::vector<float> out0(static_cast<size_t>(n));
    silu_mul(row0.data(), 1, n, 2 * n, out0.data(), n);
    for (int rep = 0; rep < 10; ++rep) {
      const int64_t rows = rng.uniform_int(1, 70);
      const int64_t index = rng.uniform_int(0, rows - 1);
      const int64_t ld = 2 * n + rng.uniform_int(0, 7);
      const int64_t ldo = n + rng.uniform_int(0, 7);
      std::vector<float> gu = random_gate_up(rng, rows, ld);
      std::memcpy(gu.data() + index * ld, row0.data(), sizeof(float) * 2 * n);
      std::vector<float> out(static_cast<size_t>(rows * ldo));
      silu_mul(gu.data(), rows, n, ld, out.data(), ldo);
      ASSERT_TRUE(BitsEqual(out0.data(), out.data() + index * ldo, n))
          << "n=" << n << " batch " << rows << " row " << index;
    }
  }
}

TEST(ActivationTest, MatchesDoubleReference) {
  // silu(g)·u against g/(1 + e^-g)·u in double. exp_f32 is ≤ 2 ulp (≤ 4u relative; math_test),
  // which perturbs 1 + e by ≤ 4u·e/(1+e); the add, the division and the product round once each:
  // ≤ 7u relative to first order (7.01u covers the rest), plus 2^-149 absolute for products that
  // land among the subnormals. |g| ≤ 88 keeps e^-g finite (see math_test for beyond).
  Rng rng(42);
  double worst = 0.0;  // in units of u, over normal results
  for (int64_t n : {1, 64, 1000}) {
    const int64_t rows = 20;
    const std::vector<float> gu = random_gate_up(rng, rows, 2 * n);
    std::vector<float> out(static_cast<size_t>(rows * n));
    silu_mul(gu.data(), rows, n, 2 * n, out.data(), n);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        const double g = gu[r * 2 * n + i];
        const double u = gu[r * 2 * n + n + i];
        const double want = g / (1.0 + std::exp(-g)) * u;
        const double err = std::fabs(out[r * n + i] - want);
        ASSERT_LE(err, 7.01 * test::kU * std::fabs(want) + 0x1p-149) << "g=" << g << " u=" << u;
        if (std::fabs(want) >= 0x1p-126) worst = std::max(worst, err / std::fabs(want) / test::kU);
      }
    }
  }
  std::printf("[ measured ] silu_mul max relative error %.3f u (bound 7 u)\n", worst);
}

}  // namespace
}  // namespace ditto
