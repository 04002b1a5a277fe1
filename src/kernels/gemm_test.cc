// PackedMatrix layout and GEMM. Contract (gemm.h): each output is one float32 fma chain over k in
// increasing order from +0.0 with W converted exactly (bf16 weights: x rounded to bf16, the
// VDPBF16PS pair chain), split over m and n only. Checked as bits against that chain written out here, across batch
// sizes/positions, thread counts, fused vs separate packing, all three weight dtypes; and for correctness against
// double dot products.
#include "kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernel_test_util.h"
#include "kernels/packed_matrix.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::kAllDTypes;
using test::Rng;
using test::StoredMatrix;

PackedMatrix pack_one(const StoredMatrix& w) {
  const MatrixSource src = w.source();
  return pack_matrix({&src, 1});
}

// A subnormal read or produced by the bf16 pair step becomes a zero of the same sign.
float flushed(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

// The contract sentences of gemm.h, literally. f16/f32 weights: y[r, j] = fma chain over kk
// ascending from +0.0. bf16 weights: x rounded to bf16; per pair (2i, 2i+1), ascending i, the odd
// element's fma first, every input and result flushed; an odd k's missing element is 0·0; a NaN
// result is 0x7FC00000.
std::vector<float> contract_gemm(const float* x, int64_t m, int64_t ldx, const StoredMatrix& w) {
  std::vector<float> y(static_cast<size_t>(m * w.n));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < w.n; ++j) {
      float acc = 0.0f;
      if (w.dtype != DType::kBF16) {
        for (int64_t kk = 0; kk < w.k; ++kk) acc = std::fma(x[r * ldx + kk], static_cast<float>(w.at(j, kk)), acc);
      } else {
        auto xb = [&](int64_t kk) { return kk < w.k ? flushed(bf16_to_f32(f32_to_bf16(x[r * ldx + kk]))) : 0.0f; };
        auto wb = [&](int64_t kk) { return kk < w.k ? flushed(static_cast<float>(w.at(j, kk))) : 0.0f; };
        for (int64_t kk = 0; kk < w.k; kk += 2) {
          acc = flushed(std::fma(xb(kk + 1), wb(kk + 1), acc));
          acc = flushed(std::fma(xb(kk), wb(kk), acc));
        }
        if (std::isnan(acc)) acc = std::bit_cast<float>(0x7fc00000u);
      }
      y[static_cast<size_t>(r * w.n + j)] = acc;
    }
  }
  return y;
}

// Byte offset of W[r, c] in a packed float matrix (packed_matrix.h): bf16 in pairs of k per lane.
size_t packed_offset(DType dtype, int64_t k, int64_t r, int64_t c) {
  const size_t es = dtype_size(dtype);
  if (dtype == DType::kBF16) {
    const int64_t kp = k + (k & 1);
    return static_cast<size_t>(((r / 16) * kp + c - c % 2) * 16 + (r % 16) * 2 + c % 2) * es;
  }
  return static_cast<size_t>((r / 16) * k * 16 + c * 16 + r % 16) * es;
}

// Activations with the awkward values mixed in: signed zeros, float32 subnormals, large ones.
std::vector<float> random_activations(Rng& rng, int64_t count) {
  std::vector<float> x = rng.normal_vector(static_cast<size_t>(count));
  for (float& v : x) {
    switch (rng.next() % 32) {
      case 0: v = 0.0f; break;
      case 1: v = -0.0f; break;
      case 2: v *= 0x1p-130f; break;
      case 3: v *= 1000.0f; break;
      default: break;
    }
  }
  return x;
}

TEST(PackedMatrixTest, LayoutHoldsSourceBitsForEveryDtype) {
  Rng rng(1);
  for (DType dtype : kAllDTypes) {
    for (int64_t n : {1, 15, 16, 17, 45}) {
      for (int64_t k : {1, 3, 16, 33}) {
        const StoredMatrix w = test::random_matrix(rng, dtype, n, k);
        const PackedMatrix p = pack_one(w);
        const size_t es = dtype_size(dtype);
        ASSERT_EQ(p.n, n);
        ASSERT_EQ(p.k, k);
        ASSERT_EQ(p.dtype, dtype);
        ASSERT_EQ(p.num_panels(), (n + 15) / 16);
        const int64_t padded_k = dtype == DType::kBF16 ? k + k % 2 : k;
        ASSERT_EQ(p.data.size(), static_cast<size_t>(p.num_panels() * padded_k * kPanelWidth) * es);
        std::vector<float> row(static_cast<size_t>(k));
        for (int64_t r = 0; r < p.num_panels() * kPanelWidth; ++r) {
          for (int64_t c = 0; c < k; ++c) {
            // data[panel][kk][lane] = W[panel·16 + lane, kk] (bf16: [kk / 2][lane][kk % 2]); rows past n
            // are zero.
            const uint8_t* packed = p.data.data() + packed_offset(dtype, k, r, c);
            if (r < n) {
              ASSERT_EQ(std::memcmp(packed, w.bytes.data() + (r * k + c) * es, es), 0)
                  << test::dtype_label(dtype) << " W[" << r << ", " << c << "]";
              ASSERT_EQ(p.at(r, c), w.at(r, c)) << test::dtype_label(dtype);
            } else {
              for (size_t b = 0; b < es; ++b) ASSERT_EQ(packed[b], 0) << "pad row " << r;
            }
          }
          if (r < n) {
            p.row_to_f32(r, row.data());
            for (int64_t c = 0; c < k; ++c) ASSERT_EQ(row[c], w.at(r, c)) << r << ", " << c;
          }
          if (dtype == DType::kBF16 && k % 2 == 1) {  // an odd k's last pair ends in a zero
            const uint8_t* pad = p.data.data() + packed_offset(dtype, k + 1, r, k);
            ASSERT_EQ(pad[0] | pad[1], 0) << "pair padding of row " << r;
          }
        }
      }
    }
  }
}

TEST(PackedMatrixTest, FusedPartsAreConcatenatedAlongN) {
  Rng rng(2);
  for (DType dtype : kAllDTypes) {
    const StoredMatrix a = test::random_matrix(rng, dtype, 5, 7);
    const StoredMatrix b = test::random_matrix(rng, dtype, 20, 7);
    const StoredMatrix c = test::random_matrix(rng, dtype, 9, 7);
    const MatrixSource parts[] = {a.source(), b.source(), c.source()};
    const PackedMatrix p = pack_matrix(parts);
    ASSERT_EQ(p.n, 34);
    ASSERT_EQ(p.k, 7);
    for (int64_t col = 0; col < 7; ++col) {
      for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(p.at(r, col), a.at(r, col));
      for (int64_t r = 0; r < 20; ++r) EXPECT_EQ(p.at(5 + r, col), b.at(r, col));
      for (int64_t r = 0; r < 9; ++r) EXPECT_EQ(p.at(25 + r, col), c.at(r, col));
    }
  }
}

TEST(PackedMatrixTest, ManyPartsAndThreadsGiveTheSameLayout) {
  // Random part lists (empty parts, parts straddling panel boundaries) packed with 1, 2, 3 threads
  // hold the same bytes as the layout formula applied to the concatenation.
  Rng rng(4);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (int trial = 0; trial < 30; ++trial) {
    const DType dtype = kAllDTypes[trial % 3];
    const int64_t k = rng.uniform_int(1, 40);
    std::vector<StoredMatrix> parts;
    std::vector<MatrixSource> sources;
    const int64_t num_parts = rng.uniform_int(1, 6);
    for (int64_t i = 0; i < num_parts; ++i) parts.push_back(test::random_matrix(rng, dtype, rng.uniform_int(0, 40), k));
    if (parts[0].n == 0) parts[0] = test::random_matrix(rng, dtype, 1, k);
    for (const StoredMatrix& part : parts) sources.push_back(part.source());
    const PackedMatrix p = pack_matrix(sources);
    const size_t es = dtype_size(dtype);
    std::vector<uint8_t> want(p.data.size(), 0);
    int64_t row = 0;
    for (const StoredMatrix& part : parts) {
      for (int64_t r = 0; r < part.n; ++r, ++row)
        for (int64_t c = 0; c < k; ++c)
          std::memcpy(&want[packed_offset(dtype, k, row, c)], &part.bytes[(r * k + c) * es], es);
    }
    ASSERT_EQ(p.n, row);
    ASSERT_TRUE(std::equal(p.data.begin(), p.data.end(), want.begin(), want.end())) << "trial " << trial;
    for (ThreadPool* pool : {&pool1, &pool2, &pool3})
      ASSERT_TRUE(std::ranges::equal(pack_matrix(sources, pool).data, want))
          << "trial " << trial << " threads " << pool->num_threads();
  }
}

TEST(PackedMatrixTest, RejectsPartsThatDisagreeOnKOrDtype) {
  Rng rng(3);
  const StoredMatrix a = test::random_matrix(rng, DType::kBF16, 4, 8);
  const StoredMatrix other_k = test::random_matrix(rng, DType::kBF16, 4, 9);
  const StoredMatrix other_dtype = test::random_matrix(rng, DType::kF16, 4, 8);
  for (const StoredMatrix* bad : {&other_k, &other_dtype}) {
    const MatrixSource parts[] = {a.source(), bad->source()};
    try {
      pack_matrix(parts);
      ADD_FAILURE() << "pack_matrix accepted mismatched parts";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  }
}

TEST(PackedMatrixTest, PackRowsIntoEqualsPackingTheNewRowsWhole) {
  // Replacing one part of a fused matrix in place gives the bytes pack_matrix gives for the fused
  // matrix with the new part: every dtype, odd k, parts straddling panels, 1 and 3 threads.
  Rng rng(5);
  ThreadPool pool(3);
  for (DType dtype : kAllDTypes) {
    for (int64_t k : {1, 7, 16}) {
      const StoredMatrix a = test::random_matrix(rng, dtype, 5, k);
      const StoredMatrix b = test::random_matrix(rng, dtype, 20, k);
      const StoredMatrix c = test::random_matrix(rng, dtype, 9, k);
      const StoredMatrix new_b = test::random_matrix(rng, dtype, 20, k);
      const MatrixSource old_parts[] = {a.source(), b.source(), c.source()};
      const MatrixSource new_parts[] = {a.source(), new_b.source(), c.source()};
      const PackedMatrix want = pack_matrix(new_parts);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        PackedMatrix w = pack_matrix(old_parts);
        pack_rows_into(w, 5, new_b.source(), p);
        ASSERT_TRUE(std::ranges::equal(w.data, want.data)) << test::dtype_label(dtype) << " k=" << k;
      }
    }
  }
}

TEST(PackedMatrixTest, PackRowsIntoRefusesRowsThatDoNotFit) {
  Rng rng(6);
  const StoredMatrix a = test::random_matrix(rng, DType::kBF16, 8, 8);
  PackedMatrix w = pack_one(a);
  const StoredMatrix other_k = test::random_matrix(rng, DType::kBF16, 4, 9);
  const StoredMatrix other_dtype = test::random_matrix(rng, DType::kF16, 4, 8);
  const StoredMatrix too_many = test::random_matrix(rng, DType::kBF16, 5, 8);
  const std::vector<uint8_t> before(w.data.begin(), w.data.end());
  for (const StoredMatrix* bad : {&other_k, &other_dtype, &too_many}) {
    try {
      pack_rows_into(w, 4, bad->source());
      ADD_FAILURE() << "pack_rows_into accepted rows that do not fit";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  }
  EXPECT_TRUE(std::ranges::equal(w.data, before));
}

TEST(GemmTest, MatchesContractFmaChainBitwise) {
  Rng rng(10);
  for (DType dtype : kAllDTypes) {
    for (int64_t n : {1, 15, 16, 17, 50}) {
      for (int64_t k : {1, 2, 7, 64, 129, 301}) {
        const StoredMatrix w = test::random_matrix(rng, dtype, n, k);
        const PackedMatrix p = pack_one(w);
        for (int64_t m : {1, 3, 4, 5, 9, 131}) {  // 131: bf16's many-row path (unpacked blocks)
          const int64_t ldx = k + 3;
          const int64_t ldy = n + 5;
          const std::vector<float> x = random_activations(rng, m * ldx);
          // Sentinels in the row padding catch writes past column n (n is rarely a multiple of 16).
          std::vector<float> y(static_cast<size_t>(m * ldy), std::numeric_limits<float>::quiet_NaN());
          gemm(x.data(), m, ldx, p, y.data(), ldy, nullptr);
          const std::vector<float> want = contract_gemm(x.data(), m, ldx, w);
          for (int64_t r = 0; r < m; ++r) {
            ASSERT_TRUE(BitsEqual(want.data() + r * n, y.data() + r * ldy, n))
                << test::dtype_label(dtype) << " n=" << n << " k=" << k << " m=" << m << " row " << r;
            for (int64_t j = n; j < ldy; ++j)
              ASSERT_TRUE(std::isnan(y[r * ldy + j])) << "wrote y[" << r << ", " << j << "]";
          }
        }
      }
    }
  }
}

TEST(GemmTest, RowAloneEqualsRowInsideRandomBatches) {
  Rng rng(11);
  ThreadPool pool2(2), pool3(3), pool1(1);
  ThreadPool* pools[] = {nullptr, &pool1, &pool2, &pool3};
  for (int trial = 0; trial < 36; ++trial) {
    const DType dtype = kAllDTypes[trial % 3];
    int64_t n = rng.uniform_int(1, 100);
    if (n % 16 == 0) ++n;
    const int64_t k = rng.uniform_int(1, 150) * 2 - 1;  // odd
    const StoredMatrix w = test::random_matrix(rng, dtype, n, k);
    const PackedMatrix p = pack_one(w);
    const std::vector<float> x0 = random_activations(rng, k);
    std::vector<float> y0(static_cast<size_t>(n));
    gemm(x0.data(), 1, k, p, y0.data(), n, nullptr);
    ASSERT_TRUE(BitsEqual(contract_gemm(x0.data(), 1, k, w), y0));
    for (int rep = 0; rep < 10; ++rep) {
      const int64_t m = rng.uniform_int(1, 140);  // past 128: bf16's unpacked path too
      const int64_t index = rng.uniform_int(0, m - 1);
      const int64_t ldx = k + rng.uniform_int(0, 5);
      const int64_t ldy = n + rng.uniform_int(0, 5);
      std::vector<float> x = random_activations(rng, m * ldx);
      std::memcpy(x.data() + index * ldx, x0.data(), sizeof(float) * k);
      std::vector<float> y(static_cast<size_t>(m * ldy));
      ThreadPool* pool = pools[rng.next() % 4];
      gemm(x.data(), m, ldx, p, y.data(), ldy, pool);
      ASSERT_TRUE(BitsEqual(y0.data(), y.data() + index * ldy, n))
          << test::dtype_label(dtype) << " n=" << n << " k=" << k << " batch " << m << " row " << index << " threads "
          << (pool ? pool->num_threads() : 0);
    }
  }
}

TEST(GemmTest, ThreadCountDoesNotChangeBits) {
  Rng rng(12);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (DType dtype : kAllDTypes) {
    const int64_t n = 211;  // 14 panels: uneven chunks for 2 and 3 threads
    const int64_t k = 77;
    const StoredMatrix w = test::random_matrix(rng, dtype, n, k);
    const PackedMatrix p = pack_one(w);
    for (int64_t m : {1, 6, 70}) {
      const std::vector<float> x = random_activations(rng, m * k);
      std::vector<float> y_none(static_cast<size_t>(m * n));
      gemm(x.data(), m, k, p, y_none.data(), n, nullptr);
      for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
        std::vector<float> y(static_cast<size_t>(m * n));
        gemm(x.data(), m, k, p, y.data(), n, pool);
        EXPECT_TRUE(BitsEqual(y_none, y))
            << test::dtype_label(dtype) << " m=" << m << " threads " << pool->num_threads();
      }
    }
  }
}

TEST(GemmTest, FusedPackingGivesSameBitsAsSeparate) {
  Rng rng(13);
  ThreadPool pool2(2);
  for (DType dtype : kAllDTypes) {
    const int64_t k = 129;
    const StoredMatrix parts[] = {test::random_matrix(rng, dtype, 13, k), test::random_matrix(rng, dtype, 40, k),
                                  test::random_matrix(rng, dtype, 7, k)};
    const MatrixSource sources[] = {parts[0].source(), parts[1].source(), parts[2].source()};
    const PackedMatrix fused = pack_matrix(sources);
    const int64_t m = 9;
    const std::vector<float> x = random_activations(rng, m * k);
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
      std::vector<float> y_fused(static_cast<size_t>(m * fused.n));
      gemm(x.data(), m, k, fused, y_fused.data(), fused.n, pool);
      int64_t offset = 0;
      for (const StoredMatrix& part : parts) {
        std::vector<float> y(static_cast<size_t>(m * part.n));
        gemm(x.data(), m, k, pack_one(part), y.data(), part.n, pool);
        for (int64_t r = 0; r < m; ++r)
          EXPECT_TRUE(BitsEqual(y.data() + r * part.n, y_fused.data() + r * fused.n + offset, part.n))
              << test::dtype_label(dtype) << " part at column " << offset << " row " << r;
        offset += part.n;
      }
    }
  }
}

TEST(GemmTest, MatchesDoubleReferenceWithinChainBound) {
  // Every term x·w of an fma chain of length k passes through at most k roundings (its own fma and
  // the later ones), so |y − Σx·w| ≤ γ_k·Σ|x·w| (Higham, eq. 3.5, with fma). The double reference
  // (products exact in double, sum error ≤ γ^double_k·Σ|x·w|) is added to the bound, as is k·2^-150
  // for possible underflow of tiny products (bf16: k·2^-125, a flushed result per step). This worst
  // case is far above typical errors (≈ √k·u), yet a wrong weight or a dropped term exceeds it.
  // bf16 weights see x rounded to bf16 (x̂, |x̂ − x| ≤ 2^-8·|x|): against Σx̂·w the same bound
  // holds; against the unrounded Σx·w the bound grows by 2^-8·(1 + γ_k)·Σ|x·w|.
  Rng rng(14);
  double worst_ratio = 0.0;      // observed error / (u·Σ|x·w|), against the x the chain used
  double worst_unrounded = 0.0;  // bf16 weights: observed error / Σ|x·w| against the unrounded x
  for (DType dtype : kAllDTypes) {
    const bool bf16 = dtype == DType::kBF16;
    for (int64_t k : {1, 2, 17, 255, 1024, 4096}) {
      const int64_t n = 37;
      const int64_t m = 3;
      const StoredMatrix w = test::random_matrix(rng, dtype, n, k, 0.05f);
      const PackedMatrix p = pack_one(w);
      const std::vector<float> x = rng.normal_vector(static_cast<size_t>(m * k));
      std::vector<float> y(static_cast<size_t>(m * n));
      gemm(x.data(), m, k, p, y.data(), n, nullptr);
      const double gamma = test::gamma_n(k) + static_cast<double>(k) * 0x1p-52;
      const double underflow = static_cast<double>(k) * (bf16 ? 0x1p-125 : 0x1p-150);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0, abs_sum = 0.0;  // with the x the chain multiplies (bf16: rounded)
          double exact = 0.0;               // with the unrounded x
          for (int64_t kk = 0; kk < k; ++kk) {
            const float xv = x[r * k + kk];
            const double used = bf16 ? bf16_to_f32(f32_to_bf16(xv)) : xv;
            sum += used * w.at(j, kk);
            abs_sum += std::fabs(used * w.at(j, kk));
            exact += static_cast<double>(xv) * w.at(j, kk);
          }
          const double err = std::fabs(y[r * n + j] - sum);
          ASSERT_LE(err, gamma * abs_sum + underflow)
              << test::dtype_label(dtype) << " k=" << k << " y[" << r << ", " << j << "]";
          if (abs_sum > 0) worst_ratio = std::max(worst_ratio, err / (test::kU * abs_sum));
          if (bf16) {
            const double err_exact = std::fabs(y[r * n + j] - exact);
            ASSERT_LE(err_exact, (0x1p-8 * (1 + gamma) + gamma) * abs_sum * (1 + 0x1p-7) + underflow)
                << "bf16 against unrounded x, k=" << k << " y[" << r << ", " << j << "]";
            if (abs_sum > 0) worst_unrounded = std::max(worst_unrounded, err_exact / abs_sum);
          }
        }
      }
    }
  }
  std::printf("[ measured ] gemm max |y - ref| = %.3f u·Σ|x·w| (bound γ_k, k·u up to 4096 u)\n", worst_ratio);
  std::printf("[ measured ] bf16 gemm against unrounded x: max |y - Σx·w| = 2^%.2f·Σ|x·w| (bound ≈ 2^-8)\n",
              std::log2(worst_unrounded));
}

}  // namespace
}  // namespace ditto
