// The quantized GEMM (kernels/quant_gemm.h): bit for bit against the canonical formulas of
// docs/NUMERICS.md written out here from the GGML bytes, for correctness against a float64
// reference within a bound derived from the scheme, and for batch invariance (row alone vs.
// inside batches of 1..70 rows in any order, 1 or 2 threads) compared with memcmp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/gemm.h"
#include "kernels/kernel_test_util.h"
#include "kernels/packed_matrix.h"
#include "kernels/quant.h"
#include "kernels/quant_gemm.h"

#include "kernels/quant_test_util.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;
using namespace quant_test;  // NOLINT(google-build-using-namespace)

// ---- The canonical numerics, written out from the GGML bytes ------------------------------------

struct ActBlock {
  float d = 0, s = 0;
  std::vector<int> q;  // [block]
};

// docs/NUMERICS.md: amax, d = amax/127 (float32), d < FLT_MIN → all zero; q = rne(x·(1/d)).
std::vector<ActBlock> quantize_x(const float* x, int64_t k, int64_t block) {
  std::vector<ActBlock> out;
  for (int64_t b = 0; b < k / block; ++b) {
    ActBlock a;
    float amax = 0;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b * block + i]));
    a.d = amax / 127.0f;
    if (!(a.d >= FLT_MIN)) a.d = 0;
    const float id = a.d == 0 ? 0.0f : 1.0f / a.d;
    int sum = 0;
    for (int64_t i = 0; i < block; ++i) {
      // A row with inf or NaN has no quantization (its outputs are NaN, contract_gemm): 0 here
      // rather than an out-of-range cast.
      const float v = x[b * block + i] * id;
      a.q.push_back(std::isfinite(v) ? static_cast<int>(std::nearbyint(v)) : 0);
      sum += a.q.back();
    }
    a.s = a.d * static_cast<float>(sum);
    out.push_back(a);
  }
  return out;
}

bool row_finite(const float* x, int64_t k) {
  for (int64_t i = 0; i < k; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

float canonical_output(float acc) { return std::isnan(acc) ? std::bit_cast<float>(kCanonicalNan) : acc; }

// The K-quants whose blocks carry dmin and per-sub-block mins.
bool has_k_min(QuantType t) { return t == QuantType::kQ4_K || t == QuantType::kQ5_K || t == QuantType::kQ2_K; }

// Value i of a block as docs/NUMERICS.md's integers: w_i = d·scale·v (− dmin·min for the K-quants
// with mins; + m for Q4_1 and Q5_1), read from the GGML fields as ggml's dequantize_row_* does.
struct CanonicalWeight {
  int v, scale, min;
};
CanonicalWeight canonical_weight(QuantType t, const QuantBlockFields& f, int i) {
  const int q = f.q[i];
  switch (t) {
    case QuantType::kQ8_0:
    case QuantType::kQ4_1:
    case QuantType::kQ5_1: return {q, 1, 0};
    case QuantType::kQ4_0: return {q - 8, 1, 0};
    case QuantType::kQ5_0: return {q - 16, 1, 0};
    case QuantType::kIQ4_NL: return {kIq4nlValues[q], 1, 0};
    case QuantType::kQ4_K:
    case QuantType::kQ5_K: return {q, f.sc[i / 32], f.mins[i / 32]};
    case QuantType::kQ6_K: return {q - 32, f.sc[i / 16], 0};
    case QuantType::kQ3_K: return {q - 4, f.sc[i / 16] - 32, 0};
    case QuantType::kQ2_K: return {q, f.sc[i / 16], f.mins[i / 16]};
    case QuantType::kIQ4_XS: return {kIq4nlValues[q], f.sc[i / 32] - 32, 0};
    case QuantType::kNone: break;
  }
  return {0, 0, 0};
}

std::vector<float> contract_gemm(QuantType t, const std::vector<uint8_t>& w, int64_t n, int64_t k, const float* x,
                                 int64_t m, int64_t ldx) {
  const QuantFormat& f = quant_format(t);
  const int64_t act_block = f.block_size;  // 32 for the 32-value formats, 256 for the K-quants and IQ4_XS
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r) {
    const std::vector<ActBlock> xa = quantize_x(x + r * ldx, k, act_block);
    const bool finite = row_finite(x + r * ldx, k);  // else xa is unused: the row's outputs are NaN
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t b = 0; b < k / f.block_size; ++b) {
        QuantBlockFields wf;
        unpack_block(t, w.data() + j * quant_row_bytes(t, k) + b * f.block_bytes, &wf);
        const ActBlock& a = xa[b];
        const float dw = f16_to_f32(wf.d), mw = f16_to_f32(wf.m);
        int32_t isum = 0, msum = 0;
        for (int i = 0; i < f.block_size; ++i) {
          const CanonicalWeight cw = canonical_weight(t, wf, i);
          isum += cw.scale * cw.v * a.q[i];
          msum += cw.min * a.q[i];
        }
        acc = std::fma(dw * a.d, static_cast<float>(isum), acc);
        if (t == QuantType::kQ4_1 || t == QuantType::kQ5_1) acc = std::fma(mw, a.s, acc);
        if (has_k_min(t)) acc = std::fma(-(mw * a.d), static_cast<float>(msum), acc);
      }
      y[r * n + j] = finite ? canonical_output(acc) : std::bit_cast<float>(kCanonicalNan);
    }
  }
  return y;
}

std::vector<float> run_gemm(const PackedMatrix& p, const float* x, int64_t m, int64_t ldx, ThreadPool* pool,
                            int64_t ldy = -1) {
  if (ldy < 0) ldy = p.n;
  std::vector<float> y(static_cast<size_t>(m * ldy), -7.0f);
  gemm(x, m, ldx, p, y.data(), ldy, pool);
  return y;
}

std::vector<float> activations(Rng& rng, int64_t count) {
  std::vector<float> x = rng.normal_vector(static_cast<size_t>(count));
  for (size_t i = 0; i < x.size(); ++i) {
    if (rng.next() % 50 == 0) x[i] *= 40.0f;  // outliers set a block's amax
    if (rng.next() % 60 == 0) x[i] = rng.next() % 2 ? 0.0f : -0.0f;
  }
  return x;
}

TEST(QuantGemmTest, MatchesTheCanonicalFormulasBitwise) {
  Rng rng(5);
  ThreadPool pool(2);
  for (QuantType t : kAllQuant) {
    const int64_t bs = quant_format(t).block_size;
    for (int64_t n : {1, 7, 16, 33, 50}) {
      for (int64_t blocks : {1, 2, 5}) {
        const int64_t k = blocks * bs;
        const std::vector<uint8_t> w = random_rows(rng, t, n, k);
        const PackedMatrix p = pack_rows(t, w, n, k);
        for (int64_t m : {1, 2, 5, 7}) {
          const int64_t ldx = k + 3, ldy = n + 2;
          const std::vector<float> x = activations(rng, m * ldx);
          const std::vector<float> want = contract_gemm(t, w, n, k, x.data(), m, ldx);
          // On avx512 with VNNI, the variant without it too (DITTO_AVX512_VNNI=0).
          for (bool vnni : {true, false}) {
            if (!vnni && !avx512_vnni_enabled()) continue;
            ScopedAvx512Vnni scoped(vnni);
            const std::vector<float> y = run_gemm(p, x.data(), m, ldx, m % 2 ? &pool : nullptr, ldy);
            for (int64_t r = 0; r < m; ++r) {
              ASSERT_TRUE(BitsEqual(want.data() + r * n, y.data() + r * ldy, n))
                  << label(t) << " n=" << n << " k=" << k << " m=" << m << " row " << r
                  << (vnni ? "" : " without vnni");
              for (int64_t j = n; j < ldy; ++j) ASSERT_EQ(y[r * ldy + j], -7.0f) << "wrote past n";
            }
          }
        }
      }
    }
  }
}

TEST(QuantGemmTest, NonFiniteRowGivesCanonicalNanAndLeavesOtherRows) {
  Rng rng(6);
  for (QuantType t : kAllQuant) {
    const int64_t k = 2 * quant_format(t).block_size, n = 19, m = 4;
    const std::vector<uint8_t> w = random_rows(rng, t, n, k);
    const PackedMatrix p = pack_rows(t, w, n, k);
    std::vector<float> x = activations(rng, m * k);
    x[1 * k + 5] = NAN;
    x[2 * k + k - 1] = -INFINITY;
    const std::vector<float> y = run_gemm(p, x.data(), m, k, nullptr);
    for (int64_t r : {1, 2})
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(test::bits_of(y[r * n + j]), kCanonicalNan) << label(t);
    const std::vector<float> alone = run_gemm(p, x.data() + 3 * k, 1, k, nullptr);
    EXPECT_TRUE(BitsEqual(alone.data(), y.data() + 3 * n, n)) << label(t);
    EXPECT_TRUE(BitsEqual(contract_gemm(t, w, n, k, x.data(), m, k), y)) << label(t);
  }
}

// Accuracy against float64: y_ref = Σ_i x_i·w_i with w from dequantize_row_f64 and x exact.
// Bound, derived from the scheme (docs/NUMERICS.md, "accuracy"):
//   activation rounding: q = rne(x·id) with |x·id − x/d| ≤ 127·2u, so |x − d·q| ≤ d·(1/2 + 254u),
//     contributing Σ_i |w_i|·d_b(i)·(1/2 + 254u);
//   float32 arithmetic: each block term (dw·dx)·isum passes through the product dw·dx, the int →
//     float conversion and the remaining fmas of the chain (L = blocks, or 2·blocks for Q4_1/Q4_K),
//     so the chain adds at most γ_{L+2}·Σ_b |terms_b| (Higham, Lemma 3.1), terms evaluated exactly.
TEST(QuantGemmTest, MatchesFloat64ReferenceWithinDerivedBound) {
  Rng rng(7);
  double worst_ratio = 0;
  for (QuantType t : kAllQuant) {
    const QuantFormat& f = quant_format(t);
    for (int64_t blocks : {1, 3, 16, 64}) {
      const int64_t k = blocks * f.block_size, n = 21, m = 3;
      const std::vector<uint8_t> w = random_rows(rng, t, n, k);
      const PackedMatrix p = pack_rows(t, w, n, k);
      const std::vector<float> x = activations(rng, m * k);
      const std::vector<float> y = run_gemm(p, x.data(), m, k, nullptr);
      const bool two_steps = t == QuantType::kQ4_1 || t == QuantType::kQ5_1 || has_k_min(t);
      const int64_t chain = two_steps ? 2 * blocks : blocks;
      for (int64_t r = 0; r < m; ++r) {
        const std::vector<ActBlock> xa = quantize_x(x.data() + r * k, k, f.block_size);
        for (int64_t j = 0; j < n; ++j) {
          std::vector<double> wd(static_cast<size_t>(k));
          dequantize_row_f64(t, w.data() + j * quant_row_bytes(t, k), k, wd.data());
          double ref = 0, act_err = 0, terms = 0;
          for (int64_t i = 0; i < k; ++i) {
            ref += static_cast<double>(x[r * k + i]) * wd[i];
            act_err += std::fabs(wd[i]) * xa[i / f.block_size].d * (0.5 + 254 * test::kU);
          }
          for (int64_t b = 0; b < blocks; ++b) {
            // |terms| of block b, exactly: Σ |dequantized weight · d·q| bounds |dw·dx·isum| and the min/offset term.
            double term = 0;
            for (int64_t i = 0; i < f.block_size; ++i)
              term += std::fabs(wd[b * f.block_size + i]) * xa[b].d * std::abs(xa[b].q[i]);
            QuantBlockFields wf;
            unpack_block(t, w.data() + j * quant_row_bytes(t, k) + b * f.block_bytes, &wf);
            int qabs = 0;
            for (int v : xa[b].q) qabs += std::abs(v);
            if (two_steps) {
              // The two fma terms separately: (dw·dx)·isum and the m / dmin term, each ≤ its own Σ|·|.
              const double mterm = !has_k_min(t) ? std::fabs(decode_f16_bits(wf.m)) * xa[b].d * qabs
                                                 : std::fabs(decode_f16_bits(wf.m)) * 63 * xa[b].d * qabs;
              term += 2 * mterm;
            }
            terms += term;
          }
          const double bound = act_err + test::gamma_n(chain + 2) * terms + 1e-30;
          const double err = std::fabs(static_cast<double>(y[r * n + j]) - ref);
          ASSERT_LE(err, bound) << label(t) << " k=" << k << " y[" << r << ", " << j << "] ref " << ref;
          worst_ratio = std::max(worst_ratio, err / bound);
        }
      }
    }
  }
  std::printf("[ measured ] quantized gemm: max |y - ref| = %.3f of the derived bound\n", worst_ratio);
}

TEST(QuantGemmTest, RowAloneEqualsRowInsideAnyBatchOrderAndThreadCount) {
  Rng rng(8);
  ThreadPool pool1(1), pool2(2);
  ThreadPool* pools[] = {nullptr, &pool1, &pool2};
  for (QuantType t : kAllQuant) {
    const int64_t bs = quant_format(t).block_size;
    for (int trial = 0; trial < 4; ++trial) {
      int64_t n = rng.uniform_int(1, 90);
      if (n % 16 == 0) ++n;
      const int64_t k = bs * rng.uniform_int(1, quant_format(t).block_size == 256 ? 4 : 24);
      const std::vector<uint8_t> w = random_rows(rng, t, n, k);
      const PackedMatrix p = pack_rows(t, w, n, k);
      const std::vector<float> x0 = activations(rng, k);
      const std::vector<float> y0 = run_gemm(p, x0.data(), 1, k, nullptr);
      for (int64_t m = 1; m <= 70; m += (m < 10 ? 1 : 7)) {
        const int64_t index = rng.uniform_int(0, m - 1);
        const int64_t ldx = k + rng.uniform_int(0, 3), ldy = n + rng.uniform_int(0, 3);
        std::vector<float> x = activations(rng, m * ldx);
        std::memcpy(x.data() + index * ldx, x0.data(), sizeof(float) * k);
        ThreadPool* pool = pools[rng.next() % 3];
        const std::vector<float> y = run_gemm(p, x.data(), m, ldx, pool, ldy);
        ASSERT_EQ(std::memcmp(y0.data(), y.data() + index * ldy, sizeof(float) * n), 0)
            << label(t) << " n=" << n << " k=" << k << " batch " << m << " row " << index;
        // The same batch in reversed row order: every row keeps its bits.
        std::vector<float> xr(x.size());
        for (int64_t r = 0; r < m; ++r) std::memcpy(&xr[(m - 1 - r) * ldx], &x[r * ldx], sizeof(float) * k);
        const std::vector<float> yr = run_gemm(p, xr.data(), m, ldx, pools[(rng.next() % 2) + 1], ldy);
        for (int64_t r = 0; r < m; ++r)
          ASSERT_EQ(std::memcmp(&y[r * ldy], &yr[(m - 1 - r) * ldy], sizeof(float) * n), 0)
              << label(t) << " reversed batch " << m << " row " << r;
      }
    }
  }
}

TEST(QuantGemmTest, FusedPartsGiveTheSameBitsAsSeparate) {
  Rng rng(9);
  ThreadPool pool(2);
  for (QuantType t : kAllQuant) {
    const int64_t k = 2 * quant_format(t).block_size;
    const int64_t ns[] = {13, 40, 7};
    std::vector<std::vector<uint8_t>> parts;
    std::vector<MatrixSource> sources;
    for (int64_t n : ns) parts.push_back(random_rows(rng, t, n, k));
    for (size_t i = 0; i < parts.size(); ++i) sources.push_back({parts[i].data(), DType::kBF16, ns[i], k, t});
    const PackedMatrix fused = pack_matrix(sources, &pool);
    const int64_t m = 9;
    const std::vector<float> x = activations(rng, m * k);
    const std::vector<float> yf = run_gemm(fused, x.data(), m, k, &pool);
    int64_t offset = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::vector<float> y = run_gemm(pack_rows(t, parts[i], ns[i], k), x.data(), m, k, nullptr);
      for (int64_t r = 0; r < m; ++r)
        EXPECT_TRUE(BitsEqual(y.data() + r * ns[i], yf.data() + r * fused.n + offset, ns[i]))
            << label(t) << " part " << i << " row " << r;
      offset += ns[i];
    }
  }
}

TEST(QuantGemmTest, ReportsPackedRowsToTheCallback) {
  Rng rng(10);
  const int64_t k = 256;
  const std::vector<uint8_t> a = random_rows(rng, QuantType::kQ4_K, 20, k),
                             b = random_rows(rng, QuantType::kQ4_K, 37, k);
  const MatrixSource parts[] = {{a.data(), DType::kF32, 20, k, QuantType::kQ4_K},
                                {b.data(), DType::kF32, 37, k, QuantType::kQ4_K}};
  std::vector<int64_t> rows(2, 0);
  pack_matrix(parts, nullptr, [&](size_t part, int64_t begin, int64_t end) { rows[part] += end - begin; });
  EXPECT_EQ(rows[0], 20);
  EXPECT_EQ(rows[1], 37);
}

}  // namespace
}  // namespace ditto
