// Softmax, log-softmax and argmax over one row. Contract (softmax.h): exact max; Σ exp_f32(x − max)
// by the canonical 16-lane reduction; log_softmax = (x − max) − log_f32(Σ); argmax ties to the lowest
// index, NaN never wins. Checked as bits against that sentence, row alone vs inside random batches
// (other offsets and alignments, in place), and for correctness against double.
#include "kernels/softmax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/math.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct ContractSoftmax {
  std::vector<float> log_probs;
  std::vector<float> probs;
};

ContractSoftmax contract_softmax(const float* x, int64_t n) {
  float max = -kInf;
  for (int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  const float sum = test::lane_reduce(n, [&](float acc, int64_t i) { return acc + exp_f32(x[i] - max); });
  const float log_sum = log_f32(sum);
  ContractSoftmax r;
  for (int64_t i = 0; i < n; ++i) {
    r.log_probs.push_back((x[i] - max) - log_sum);
    r.probs.push_back(exp_f32(x[i] - max) / sum);
  }
  return r;
}

// Logits like a model's: normal with a spread `scale`, a few masked (−inf) entries if asked.
std::vector<float> random_logits(Rng& rng, int64_t n, float scale, bool masked) {
  std::vector<float> x = rng.normal_vector(static_cast<size_t>(n), scale);
  if (masked)
    for (float& v : x)
      if (rng.next() % 8 == 0) v = -kInf;
  if (masked) x[rng.next() % x.size()] = rng.normal();  // at least one finite
  return x;
}

TEST(SoftmaxTest, MatchesContractBitwise) {
  Rng rng(60);
  for (int64_t n : {1, 2, 15, 16, 17, 100, 1000, 151936}) {
    for (float scale : {0.1f, 3.0f, 30.0f}) {
      for (bool masked : {false, true}) {
        const std::vector<float> x = random_logits(rng, n, scale, masked);
        const ContractSoftmax want = contract_softmax(x.data(), n);
        std::vector<float> lp(static_cast<size_t>(n)), p(static_cast<size_t>(n));
        log_softmax_row(x.data(), n, lp.data());
        softmax_row(x.data(), n, p.data());
        EXPECT_TRUE(BitsEqual(want.log_probs, lp)) << "log_softmax n=" << n << " scale=" << scale;
        EXPECT_TRUE(BitsEqual(want.probs, p)) << "softmax n=" << n << " scale=" << scale;
      }
    }
  }
}

TEST(SoftmaxTest, RowAloneEqualsRowInsideRandomBatches) {
  // One row per call, so the batch is a buffer of rows at other offsets (and 4-byte alignments
  // other than 64): a vector path must not let either change a bit. In place must agree too.
  Rng rng(61);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t n = rng.uniform_int(1, 3000);
    const std::vector<float> x0 = random_logits(rng, n, rng.uniform(0.1f, 20.0f), trial % 2 == 1);
    std::vector<float> lp0(static_cast<size_t>(n)), p0(static_cast<size_t>(n));
    log_softmax_row(x0.data(), n, lp0.data());
    softmax_row(x0.data(), n, p0.data());
    for (int rep = 0; rep < 5; ++rep) {
      const int64_t rows = rng.uniform_int(1, 70);
      const int64_t index = rng.uniform_int(0, rows - 1);
      const int64_t ld = n + rng.uniform_int(0, 17);
      std::vector<float> x = random_logits(rng, rows * ld, 5.0f, false);
      std::memcpy(x.data() + index * ld, x0.data(), sizeof(float) * n);
      std::vector<float> lp(x.size()), p(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        log_softmax_row(x.data() + r * ld, n, lp.data() + r * ld);
        softmax_row(x.data() + r * ld, n, p.data() + r * ld);
      }
      ASSERT_TRUE(BitsEqual(lp0.data(), lp.data() + index * ld, n)) << "log_softmax batch " << rows;
      ASSERT_TRUE(BitsEqual(p0.data(), p.data() + index * ld, n)) << "softmax batch " << rows;
      std::vector<float> in_place = x;
      log_softmax_row(in_place.data() + index * ld, n, in_place.data() + index * ld);
      ASSERT_TRUE(BitsEqual(lp0.data(), in_place.data() + index * ld, n)) << "log_softmax in place";
      in_place = x;
      softmax_row(in_place.data() + index * ld, n, in_place.data() + index * ld);
      ASSERT_TRUE(BitsEqual(p0.data(), in_place.data() + index * ld, n)) << "softmax in place";
      ASSERT_EQ(argmax_row(x.data() + index * ld, n), argmax_row(x0.data(), n));
    }
  }
}

TEST(SoftmaxTest, MatchesDoubleReference) {
  // With S = Σ exp(x_j − max) and c = ceil(n/16):
  //  - x_i − max rounds once: |δ| ≤ u·|x_i − max| absolute in the exponent;
  //  - exp_f32 ≤ 2 ulp (math_test): ≤ 4u relative (plus 2^-149 absolute if subnormal);
  //  - Σ of positive terms, each through ≤ c + 4 roundings: γ_{c+4} relative, so
  //    δS/S ≤ 4u + γ_{c+4} + u·Σ_j e^(x_j − max)·|x_j − max| / S (the argument roundings, weighted).
  // log_softmax_i: |err| ≤ u·|x_i − max| + δS/S + 2 ulp of log S (≤ 4u·|log S|) + u·|result|.
  // softmax_i: relative ≤ u·|x_i − max| + 4u + δS/S + u (division), plus 2^-149 absolute.
  // First order; the factor 1.01 covers the second-order terms.
  Rng rng(62);
  double worst_lp = 0.0, worst_p = 0.0;  // in units of u
  for (int64_t n : {1, 2, 17, 1000, 151936}) {
    for (float scale : {0.1f, 3.0f, 30.0f}) {
      for (bool masked : {false, true}) {
        const std::vector<float> x = random_logits(rng, n, scale, masked);
        std::vector<float> lp(static_cast<size_t>(n)), p(static_cast<size_t>(n));
        log_softmax_row(x.data(), n, lp.data());
        softmax_row(x.data(), n, p.data());
        double max = -INFINITY;
        for (float v : x) max = std::max(max, static_cast<double>(v));
        double sum = 0.0, weighted_gap = 0.0;
        for (float v : x) {
          if (v == -kInf) continue;
          sum += std::exp(v - max);
          weighted_gap += std::exp(v - max) * (max - v);
        }
        const double log_sum = std::log(sum);
        const double u = test::kU;
        const double ds = 4 * u + test::gamma_n((n + 15) / 16 + 4) + u * weighted_gap / sum;
        for (int64_t i = 0; i < n; ++i) {
          if (x[i] == -kInf) {
            EXPECT_EQ(lp[i], -kInf);
            EXPECT_EQ(test::bits_of(p[i]), 0u);
            continue;
          }
          const double d = max - x[i];
          const double want_lp = -d - log_sum;
          const double err_lp = std::fabs(lp[i] - want_lp);
          const double tol_lp = 1.01 * (u * d + ds + 4 * u * std::fabs(log_sum) + u * std::fabs(want_lp));
          ASSERT_LE(err_lp, tol_lp) << "log_softmax n=" << n << " scale=" << scale << " i=" << i;
          const double want_p = std::exp(-d) / sum;
          const double err_p = std::fabs(p[i] - want_p);
          ASSERT_LE(err_p, 1.01 * (u * d + 5 * u + ds) * want_p + 0x1p-149)
              << "softmax n=" << n << " scale=" << scale << " i=" << i;
          if (want_lp != 0) worst_lp = std::max(worst_lp, err_lp / (u * std::max(1.0, std::fabs(want_lp))));
          if (want_p >= 0x1p-126) worst_p = std::max(worst_p, err_p / want_p / u);
        }
      }
    }
  }
  std::printf("[ measured ] log_softmax max error %.3f u·max(1, |ref|); softmax max relative error %.3f u\n", worst_lp,
              worst_p);
}

TEST(SoftmaxTest, MaskedEntriesAndConstantRows) {
  const float x[] = {-kInf, 2.0f, -kInf, 2.0f};
  float lp[4], p[4];
  log_softmax_row(x, 4, lp);
  softmax_row(x, 4, p);
  EXPECT_EQ(lp[0], -kInf);
  EXPECT_EQ(test::bits_of(p[0]), 0u);
  EXPECT_EQ(p[1], 0.5f);
  EXPECT_EQ(p[3], 0.5f);
  EXPECT_EQ(lp[1], -log_f32(2.0f));
  // A single element has probability exactly 1 and log-probability exactly 0.
  const float one[] = {-123.5f};
  log_softmax_row(one, 1, lp);
  softmax_row(one, 1, p);
  EXPECT_EQ(test::bits_of(lp[0]), 0u);
  EXPECT_EQ(p[0], 1.0f);
}

TEST(ArgmaxTest, TiesGoToTheLowestIndexAndNanNeverWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  {
    const float x[] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
    EXPECT_EQ(argmax_row(x, 5), 1);
  }
  {
    const float x[] = {5.0f, 5.0f};
    EXPECT_EQ(argmax_row(x, 2), 0);
  }
  {
    const float x[] = {nan, 1.0f, nan, 4.0f, 4.0f, nan};
    EXPECT_EQ(argmax_row(x, 6), 3);
  }
  {
    const float x[] = {-kInf, -kInf, -1e30f, nan};
    EXPECT_EQ(argmax_row(x, 4), 2);
  }
  {
    const float x[] = {0.0f, -0.0f, 0.0f};  // −0 == +0: a tie, the lowest index wins
    EXPECT_EQ(argmax_row(x, 3), 0);
  }
  {
    const float x[] = {-kInf, kInf, kInf};
    EXPECT_EQ(argmax_row(x, 3), 1);
  }
  {
    const float x[] = {7.0f};
    EXPECT_EQ(argmax_row(x, 1), 0);
  }
  // Random rows with many exact ties (values from a small set) against a first-occurrence scan.
  Rng rng(63);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t n = rng.uniform_int(1, 300);
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) {
      const uint64_t r = rng.next() % 20;
      v = r == 0 ? nan : static_cast<float>(r % 7);
    }
    int64_t want = -1;
    for (int64_t i = 0; i < n; ++i)
      if (!std::isnan(x[i]) && (want < 0 || x[i] > x[want])) want = i;
    if (want < 0) continue;  // all NaN: no winner to check
    ASSERT_EQ(argmax_row(x.data(), n), want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace ditto
