// Quantized weights (kernels/quant.h, kernels/quant_gemm.h): the GGML block formats decoded from
// blocks built by hand from the format definitions, the reference quantizers' round-to-nearest
// property and the packed layout's round trip. The quantized GEMM is quant_gemm_test.cc's.
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

// ---- Formats ----------------------------------------------------------------------------------

TEST(QuantFormatTest, SizesNamesAndRowBytes) {
  struct Want {
    QuantType t;
    int64_t block_size, block_bytes;
    const char* name;
  };
  for (const Want& w : {Want{QuantType::kQ8_0, 32, 34, "Q8_0"}, Want{QuantType::kQ4_0, 32, 18, "Q4_0"},
                        Want{QuantType::kQ4_1, 32, 20, "Q4_1"}, Want{QuantType::kQ4_K, 256, 144, "Q4_K"},
                        Want{QuantType::kQ6_K, 256, 210, "Q6_K"}}) {
    EXPECT_EQ(quant_format(w.t).block_size, w.block_size);
    EXPECT_EQ(quant_format(w.t).block_bytes, w.block_bytes);
    EXPECT_EQ(quant_format(w.t).name, w.name);
    EXPECT_EQ(quant_row_bytes(w.t, 3 * w.block_size), 3 * w.block_bytes);
    try {
      quant_row_bytes(w.t, w.block_size + 1);
      ADD_FAILURE() << "accepted a partial block";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(w.name), std::string::npos) << e.what();
    }
  }
}

// ---- Hand-built blocks ------------------------------------------------------------------------

// Checks both dequantizers of one block against the expected values: float64 exactly, float32 as
// the correctly rounded float64 value (NUMERICS.md: exact for all but Q4_1, one rounding for Q4_1).
void expect_dequantized(QuantType t, const std::vector<uint8_t>& block, const std::vector<double>& want) {
  const int64_t k = static_cast<int64_t>(want.size());
  std::vector<double> got(want.size());
  std::vector<float> got32(want.size());
  dequantize_row_f64(t, block.data(), k, got.data());
  dequantize_row_f32(t, block.data(), k, got32.data());
  for (int64_t i = 0; i < k; ++i) {
    ASSERT_EQ(got[i], want[i]) << label(t) << " element " << i;
    ASSERT_EQ(got32[i], static_cast<float>(want[i])) << label(t) << " element " << i;
  }
}

TEST(QuantDequantizeTest, Q8_0HandBuilt) {
  std::vector<uint8_t> b(34);
  put_f16(b.data(), 0.5f);
  const int8_t q[32] = {-128, -127, -1, 0,  1,  2,  127, 100, -100, 5,  6,  7,  8,  9,  10, 11,
                        12,   13,   14, 15, 16, 17, 18,  19,  20,   21, 22, 23, 24, 25, 26, -3};
  std::memcpy(b.data() + 2, q, 32);
  std::vector<double> want(32);
  for (int i = 0; i < 32; ++i) want[i] = 0.5 * q[i];
  expect_dequantized(QuantType::kQ8_0, b, want);
}

TEST(QuantDequantizeTest, Q4_0AndQ4_1LowNibblesFirst) {
  // Byte i holds element i in its low nibble and element i + 16 in its high nibble.
  std::vector<uint8_t> b0(18), b1(20);
  put_f16(b0.data(), 2.0f);
  put_f16(b1.data(), 0.25f);
  put_f16(b1.data() + 2, -1.5f);
  for (int i = 0; i < 16; ++i) b0[2 + i] = b1[4 + i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  std::vector<double> want0(32), want1(32);
  for (int i = 0; i < 32; ++i) {
    const int q = i < 16 ? i : 15 - (i - 16);
    want0[i] = 2.0 * (q - 8);
    want1[i] = 0.25 * q - 1.5;
  }
  expect_dequantized(QuantType::kQ4_0, b0, want0);
  expect_dequantized(QuantType::kQ4_1, b1, want1);
  // A value where float32 must round: d·q + m with m far smaller than d·q.
  put_f16(b1.data(), 1024.0f);
  put_f16(b1.data() + 2, 0x1p-14f + 0x1p-24f);  // an f16 subnormal tail
  for (int i = 0; i < 32; ++i) want1[i] = 1024.0 * (i < 16 ? i : 15 - (i - 16)) + (0x1p-14 + 0x1p-24);
  expect_dequantized(QuantType::kQ4_1, b1, want1);
}

TEST(QuantDequantizeTest, Q4_KScalesMinsOfAllEightSubBlocksAndNibbleOrder) {
  // The 12 scale bytes, and the (scale, min) of each sub-block worked out by hand from the format:
  // j < 4: sc = s[j] & 63, m = s[j+4] & 63; j ≥ 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
  // m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
  const uint8_t s[12] = {0xC1, 0x42, 0x83, 0x3F, 0x05, 0x86, 0x47, 0xC8, 0x21, 0x13, 0xF0, 0x0C};
  const int sc[8] = {1, 2, 3, 63, 49, 19, 32, 12};
  const int mn[8] = {5, 6, 7, 8, 2, 33, 31, 48};
  std::vector<uint8_t> b(144);
  put_f16(b.data(), 0.5f);
  put_f16(b.data() + 2, 0.125f);
  std::memcpy(b.data() + 4, s, 12);
  // qs[32c + i]: low nibble = element i of sub-block 2c, high nibble = element i of sub-block 2c+1.
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 32; ++i) b[16 + 32 * c + i] = static_cast<uint8_t>(((i + c) & 15) | (((3 * i + c) & 15) << 4));
  std::vector<double> want(256);
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      const int c = j / 2;
      const int q = j % 2 == 0 ? (i + c) & 15 : (3 * i + c) & 15;
      want[32 * j + i] = 0.5 * sc[j] * q - 0.125 * mn[j];
    }
  }
  expect_dequantized(QuantType::kQ4_K, b, want);
  for (int j = 0; j < 8; ++j) {
    int got_sc, got_m;
    q4_k_scale_min(s, j, &got_sc, &got_m);
    EXPECT_EQ(got_sc, sc[j]) << "sub-block " << j;
    EXPECT_EQ(got_m, mn[j]) << "sub-block " << j;
  }
}

TEST(QuantDequantizeTest, Q6_KLowAndHighBitPlanes) {
  // ggml's layout, written as its loop: for each half h and l < 32, elements 128h + l, +32, +64, +96
  // take low bits from ql[64h + l] (low nibble), ql[64h + 32 + l] (low), ql[64h + l] (high),
  // ql[64h + 32 + l] (high), and high bits from bits 0-1, 2-3, 4-5, 6-7 of qh[32h + l].
  std::vector<uint8_t> b(210);
  auto value = [](int e) { return (e * 7 + 3) % 64; };
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int v0 = value(128 * h + l), v1 = value(128 * h + 32 + l), v2 = value(128 * h + 64 + l),
                v3 = value(128 * h + 96 + l);
      b[64 * h + l] = static_cast<uint8_t>((v0 & 15) | ((v2 & 15) << 4));
      b[64 * h + 32 + l] = static_cast<uint8_t>((v1 & 15) | ((v3 & 15) << 4));
      b[128 + 32 * h + l] = static_cast<uint8_t>((v0 >> 4) | ((v1 >> 4) << 2) | ((v2 >> 4) << 4) | ((v3 >> 4) << 6));
    }
  }
  int8_t scales[16];
  for (int j = 0; j < 16; ++j) scales[j] = static_cast<int8_t>(j * 17 - 128);  // −128 … 127
  std::memcpy(b.data() + 192, scales, 16);
  put_f16(b.data() + 208, 0.125f);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.125 * scales[e / 16] * (value(e) - 32);
  expect_dequantized(QuantType::kQ6_K, b, want);
  // Two literal bytes: ql[0] = 0x4A, qh[0] = 0b11100100 give element 0 = 0xA | 0 << 4 = 10 and
  // element 64 = 0x4 | 2 << 4 = 36; ql[32] = 0x00 gives element 32 = 1 << 4 = 16 and 96 = 3 << 4 = 48.
  b[0] = 0x4A;
  b[32] = 0x00;
  b[128] = 0xE4;
  std::vector<double> got(256);
  dequantize_row_f64(QuantType::kQ6_K, b.data(), 256, got.data());
  EXPECT_EQ(got[0], 0.125 * scales[0] * (10 - 32));
  EXPECT_EQ(got[64], 0.125 * scales[4] * (36 - 32));
  EXPECT_EQ(got[32], 0.125 * scales[2] * (16 - 32));
  EXPECT_EQ(got[96], 0.125 * scales[6] * (48 - 32));
}

TEST(QuantDequantizeTest, Float32IsTheCorrectlyRoundedFloat64OnRandomBlocks) {
  Rng rng(1);
  for (QuantType t : kAllQuant) {
    const int64_t k = 4 * quant_format(t).block_size;
    std::vector<uint8_t> bytes(static_cast<size_t>(quant_row_bytes(t, k)));
    for (int trial = 0; trial < 200; ++trial) {
      for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng.next());
      std::vector<double> d64(static_cast<size_t>(k));
      std::vector<float> d32(static_cast<size_t>(k));
      dequantize_row_f64(t, bytes.data(), k, d64.data());
      dequantize_row_f32(t, bytes.data(), k, d32.data());
      for (int64_t i = 0; i < k; ++i) {
        if (std::isnan(d64[i])) {
          ASSERT_TRUE(std::isnan(d32[i]));
          continue;
        }
        ASSERT_EQ(d32[i], static_cast<float>(d64[i])) << label(t) << " element " << i;
      }
    }
  }
}

// ---- Reference quantizers ---------------------------------------------------------------------

// Every dequantized value is a nearest point of its (sub-)block's grid of representable values
// (round to nearest with clamping), and the error stays within the per-type bound worked out from
// the scale choice in quant.h (relative to the largest |x| of the block or super-block):
//   Q8_0  d/2 ≤ amax/254 (d = f16(amax/127), no clamping: |x|/d ≤ 127·(1+2^-11) < 127.5)
//   Q4_0  one step |d| ≈ amax/8 (the side opposite the largest value clamps at 7·|d|)
//   Q4_1  half a step (max−min)/30, plus the f16 rounding of d and m (2^-11 relative each, 15 steps)
//   Q4_K  half a step (range/30 ≤ amax/15) plus the rounding of 6-bit scales and mins: d·sc is off
//         by ≤ d/2, 7.5·d over the 15 steps, and dmin·m by ≤ dmin/2: amax/15 + 8·d + dmin/2
//   Q6_K  half a step (amax/62 + d/4) plus the rounding of the scales at the clamped end (31·d/2)
std::vector<double> block_grid(QuantType t, const QuantBlockFields& f, int i) {
  const double d = test::decode_f16(f.d), m = test::decode_f16(f.m);
  std::vector<double> g;
  switch (t) {
    case QuantType::kQ8_0:
      for (int q = -128; q < 128; ++q) g.push_back(d * q);
      break;
    case QuantType::kQ4_0:
      for (int q = 0; q < 16; ++q) g.push_back(d * (q - 8));
      break;
    case QuantType::kQ4_1:
      for (int q = 0; q < 16; ++q) g.push_back(d * q + m);
      break;
    case QuantType::kQ4_K:
      for (int q = 0; q < 16; ++q) g.push_back(d * f.sc[i / 32] * q - m * f.mins[i / 32]);
      break;
    case QuantType::kQ6_K:
      for (int q = 0; q < 64; ++q) g.push_back(d * f.sc[i / 16] * (q - 32));
      break;
    case QuantType::kNone: break;
  }
  return g;
}

TEST(QuantizeTest, RoundTripIsRoundToNearestWithinTheDerivedBound) {
  Rng rng(2);
  for (QuantType t : kAllQuant) {
    const QuantFormat& f = quant_format(t);
    double worst = 0;
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t k = f.block_size * (1 + trial % 3);
      std::vector<float> x = rng.normal_vector(static_cast<size_t>(k), trial % 2 ? 0.02f : 3.0f);
      if (trial % 5 == 0)
        for (float& v : x) v = std::fabs(v);  // one-signed blocks: Q4_1/Q4_K minima of 0 or above
      if (trial % 7 == 0) std::fill(x.begin(), x.begin() + f.block_size, 0.0f);  // an all-zero block
      std::vector<uint8_t> bytes(static_cast<size_t>(quant_row_bytes(t, k)));
      quantize_row(t, x.data(), k, bytes.data());
      std::vector<double> back(static_cast<size_t>(k));
      dequantize_row_f64(t, bytes.data(), k, back.data());
      for (int64_t b = 0; b < k / f.block_size; ++b) {
        QuantBlockFields fields;
        unpack_block(t, bytes.data() + b * f.block_bytes, &fields);
        const double d = decode_f16_bits(fields.d), m = decode_f16_bits(fields.m);
        double amax = 0, lo = 0, hi = 0;
        for (int i = 0; i < f.block_size; ++i) {
          const double v = x[b * f.block_size + i];
          amax = std::max(amax, std::fabs(v));
          lo = i == 0 ? v : std::min(lo, v);
          hi = i == 0 ? v : std::max(hi, v);
        }
        double bound = 0;
        switch (t) {
          case QuantType::kQ8_0: bound = std::fabs(d) / 2; break;
          case QuantType::kQ4_0: bound = std::fabs(d) * (1 + 0x1p-8); break;
          case QuantType::kQ4_1:
            bound = (hi - lo) / 30 * (1 + 0x1p-8) + 16 * 0x1p-11 * (std::fabs(hi - lo) + std::fabs(m)) + 0x1p-24;
            break;
          case QuantType::kQ4_K: bound = amax / 15 + 8 * std::fabs(d) + std::fabs(m) / 2; break;
          case QuantType::kQ6_K: bound = amax / 62 + 16 * std::fabs(d); break;
          case QuantType::kNone: break;
        }
        if (t == QuantType::kQ8_0) {
          EXPECT_LE(std::fabs(d), amax / 127 * (1 + 0x1p-10)) << "block " << b;
        }
        for (int i = 0; i < f.block_size; ++i) {
          const int64_t e = b * f.block_size + i;
          const double err = std::fabs(back[e] - x[e]);
          double nearest = INFINITY;
          for (double g : block_grid(t, fields, i)) nearest = std::min(nearest, std::fabs(g - x[e]));
          ASSERT_LE(err, nearest * (1 + 1e-12) + 1e-30) << label(t) << " element " << e << " x=" << x[e];
          ASSERT_LE(err, bound * (1 + 1e-9)) << label(t) << " element " << e << " x=" << x[e];
          if (amax > 0) worst = std::max(worst, err / amax);
        }
      }
    }
    std::printf("[ measured ] %s round trip: max |x - deq| = %.4f of the block's max |x|\n", label(t), worst);
  }
}

TEST(QuantizeTest, RejectsNonFiniteAndOverflowingValues) {
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> bytes(34);
  x[7] = NAN;
  EXPECT_THROW(quantize_row(QuantType::kQ8_0, x.data(), 32, bytes.data()), Error);
  x[7] = 1e30f;
  EXPECT_THROW(quantize_row(QuantType::kQ8_0, x.data(), 32, bytes.data()), Error);
}

// ---- Quantized matrices -----------------------------------------------------------------------

TEST(QuantPackedMatrixTest, KeepsEveryByteAndDequantizesLikeTheRows) {
  Rng rng(3);
  ThreadPool pool(2);
  for (QuantType t : kAllQuant) {
    const QuantFormat& f = quant_format(t);
    for (int64_t n : {1, 15, 16, 17, 40}) {
      const int64_t k = f.block_size * (n % 3 + 1);
      const std::vector<uint8_t> bytes = random_rows(rng, t, n, k);
      const PackedMatrix p = pack_rows(t, bytes, n, k, n % 2 ? &pool : nullptr);
      const int64_t row_bytes = quant_row_bytes(t, k);
      EXPECT_EQ(p.quant, t);
      EXPECT_EQ(p.weight_bytes(), n * row_bytes);
      EXPECT_EQ(static_cast<int64_t>(p.data.size()), p.num_panels() * kPanelWidth * row_bytes) << "no added bytes";
      std::vector<float> row(static_cast<size_t>(k)), want(static_cast<size_t>(k));
      for (int64_t r = 0; r < n; ++r) {
        // The panel block gives back the row's GGML bytes exactly.
        for (int64_t b = 0; b < k / f.block_size; ++b) {
          std::vector<uint8_t> block(static_cast<size_t>(f.block_bytes));
          unpack_quant_panel_block(t, p.data.data() + (r / 16) * p.panel_bytes() + b * quant_panel_block_bytes(t),
                                   static_cast<int>(r % 16), block.data());
          ASSERT_TRUE(std::equal(block.begin(), block.end(), bytes.begin() + r * row_bytes + b * f.block_bytes))
              << label(t) << " row " << r << " block " << b;
        }
        dequantize_row_f32(t, bytes.data() + r * row_bytes, k, want.data());
        p.row_to_f32(r, row.data());
        ASSERT_TRUE(BitsEqual(want, row)) << label(t) << " row " << r;
        for (int64_t c = 0; c < k; c += 37) ASSERT_EQ(test::bits_of(p.at(r, c)), test::bits_of(want[c]));
      }
    }
  }
}

TEST(QuantPackedMatrixTest, RejectsMismatchedPartsNamingBoth) {
  Rng rng(4);
  const std::vector<uint8_t> a = random_rows(rng, QuantType::kQ8_0, 4, 64);
  const std::vector<uint8_t> b = random_rows(rng, QuantType::kQ4_0, 4, 64);
  const std::vector<uint8_t> c = random_rows(rng, QuantType::kQ8_0, 4, 96);
  const std::vector<float> fl(4 * 64);
  const MatrixSource pa{a.data(), DType::kF32, 4, 64, QuantType::kQ8_0};
  for (const MatrixSource& other :
       {MatrixSource{b.data(), DType::kF32, 4, 64, QuantType::kQ4_0},
        MatrixSource{c.data(), DType::kF32, 4, 96, QuantType::kQ8_0}, MatrixSource{fl.data(), DType::kF32, 4, 64}}) {
    const MatrixSource parts[] = {pa, other};
    try {
      pack_matrix(parts);
      ADD_FAILURE() << "accepted mismatched parts";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("Q8_0"), std::string::npos) << e.what();
    }
  }
  const MatrixSource partial{a.data(), DType::kF32, 2, 48, QuantType::kQ8_0};
  EXPECT_THROW(pack_matrix({&partial, 1}), Error);
}

}  // namespace
}  // namespace ditto
