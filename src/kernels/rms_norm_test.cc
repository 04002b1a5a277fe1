// RMSNorm. Contract (rms_norm.h): Σx² by the canonical 16-lane fma reduction, then
// y = (x·r)·w with r = 1/sqrt(Σx²/n + eps), IEEE sqrt and divisions. Checked as bits against that
// sentence written out here, row alone vs inside random batches (strided and in place), and for
// correctness against double.
#include "kernels/rms_norm.h"

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

std::vector<float> contract_rms_norm(const float* x, int64_t n, const float* w, float eps) {
  const float sum_sq = test::contract_dot(x, x, n);
  const float r = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * w[i];
  return y;
}

TEST(RmsNormTest, MatchesContractBitwise) {
  Rng rng(20);
  for (int64_t n : {1, 2, 7, 15, 16, 17, 64, 128, 1000, 4096}) {
    for (float eps : {1e-6f, 1e-5f}) {
      for (float scale : {1.0f, 1e-3f, 30.0f}) {
        const std::vector<float> x = rng.normal_vector(static_cast<size_t>(n), scale);
        const std::vector<float> w = rng.normal_vector(static_cast<size_t>(n));
        std::vector<float> y(static_cast<size_t>(n));
        rms_norm_row(x.data(), n, w.data(), eps, y.data());
        EXPECT_TRUE(BitsEqual(contract_rms_norm(x.data(), n, w.data(), eps), y))
            << "n=" << n << " eps=" << eps << " scale=" << scale;
      }
    }
  }
}

TEST(RmsNormTest, RowAloneEqualsRowInsideRandomBatches) {
  Rng rng(21);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = rng.uniform_int(1, 600);
    const float eps = 1e-6f;
    const std::vector<float> w = rng.normal_vector(static_cast<size_t>(n));
    // Scales log-uniform in [1e-4, 1e2]: many rows have mean x² near eps, where eps shows in the bits.
    const float scale = static_cast<float>(std::pow(10.0, rng.uniform(-4.0f, 2.0f)));
    const std::vector<float> x0 = rng.normal_vector(static_cast<size_t>(n), scale);
    std::vector<float> y0(static_cast<size_t>(n));
    rms_norm_row(x0.data(), n, w.data(), eps, y0.data());
    std::vector<float> y1(static_cast<size_t>(n));
    rms_norm(x0.data(), 1, n, n, w.data(), eps, y1.data(), n);
    ASSERT_TRUE(BitsEqual(y0, y1)) << "rms_norm with rows = 1 vs rms_norm_row, n=" << n;
    for (int rep = 0; rep < 10; ++rep) {
      const int64_t rows = rng.uniform_int(1, 70);
      const int64_t index = rng.uniform_int(0, rows - 1);
      const int64_t ldx = n + rng.uniform_int(0, 9);
      const int64_t ldy = n + rng.uniform_int(0, 9);
      std::vector<float> x = rng.normal_vector(static_cast<size_t>(rows * ldx), rng.uniform(0.01f, 10.0f));
      std::memcpy(x.data() + index * ldx, x0.data(), sizeof(float) * n);
      std::vector<float> y(static_cast<size_t>(rows * ldy));
      rms_norm(x.data(), rows, n, ldx, w.data(), eps, y.data(), ldy);
      ASSERT_TRUE(BitsEqual(y0.data(), y.data() + index * ldy, n))
          << "n=" << n << " batch " << rows << " row " << index;
      // In place (y aliases x, same stride): the same bits.
      rms_norm(x.data(), rows, n, ldx, w.data(), eps, x.data(), ldx);
      ASSERT_TRUE(BitsEqual(y0.data(), x.data() + index * ldx, n))
          << "in place, n=" << n << " batch " << rows << " row " << index;
    }
  }
}

TEST(RmsNormTest, MatchesDoubleReference) {
  // Error bound, relative to each |y[i]|: Σx² has only positive terms, each through at most
  // c + 4 roundings (c = ceil(n/16) fmas in its lane, 4 tree adds): γ_{c+4}. Then /n and +eps add
  // one rounding each (u each; +eps of positives cannot amplify), sqrt halves the relative error and
  // adds u, 1/· adds u, ·r and ·w add u each: |δy| ≤ (γ_{c+4} + 2u)/2 + 4u to first order. The
  // factor 1.01 covers the second-order terms. Small-magnitude rows (mean x² ≈ eps) make a
  // missing or misplaced eps fail.
  Rng rng(22);
  double worst = 0.0;  // in units of u
  for (int64_t n : {1, 3, 16, 100, 1024, 4096}) {
    for (float scale : {1.0f, 1e-3f, 100.0f}) {
      for (float eps : {1e-6f, 1e-5f}) {
        const std::vector<float> x = rng.normal_vector(static_cast<size_t>(n), scale);
        const std::vector<float> w = rng.normal_vector(static_cast<size_t>(n));
        std::vector<float> y(static_cast<size_t>(n));
        rms_norm_row(x.data(), n, w.data(), eps, y.data());
        double ss = 0.0;
        for (float v : x) ss += static_cast<double>(v) * v;
        const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps));
        const int64_t c = (n + 15) / 16;
        const double tol = 1.01 * ((test::gamma_n(c + 4) + 2 * test::kU) / 2 + 4 * test::kU);
        for (int64_t i = 0; i < n; ++i) {
          const double want = static_cast<double>(x[i]) * r * w[i];
          const double err = std::fabs(y[i] - want);
          ASSERT_LE(err, tol * std::fabs(want)) << "n=" << n << " scale=" << scale << " i=" << i;
          if (want != 0) worst = std::max(worst, err / std::fabs(want) / test::kU);
        }
      }
    }
  }
  std::printf("[ measured ] rms_norm max relative error %.3f u (bound ≤ %.1f u at n = 4096)\n", worst,
              ((256 + 4 + 2) / 2.0 + 4) * 1.01);
}

}  // namespace
}  // namespace ditto
