// Quantized weights (kernels/quant.h, kernels/quant_gemm.h): the GGML block formats decoded from
// blocks built by hand from the format definitions, the reference quantizers' round-to-nearest
// property and the packed layout's round trip. The quantized GEMM is quant_gemm_test.cc's; the
// decoders against gguf-py's, on random blocks, are tests/quant/test_gguf_py_dequantize.py's.
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
                        Want{QuantType::kQ6_K, 256, 210, "Q6_K"}, Want{QuantType::kQ5_0, 32, 22, "Q5_0"},
                        Want{QuantType::kQ5_1, 32, 24, "Q5_1"}, Want{QuantType::kQ5_K, 256, 176, "Q5_K"},
                        Want{QuantType::kQ3_K, 256, 110, "Q3_K"}, Want{QuantType::kQ2_K, 256, 84, "Q2_K"},
                        Want{QuantType::kIQ4_NL, 32, 18, "IQ4_NL"}, Want{QuantType::kIQ4_XS, 256, 136, "IQ4_XS"}}) {
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

TEST(QuantDequantizeTest, Q5_0AndQ5_1FifthBitFromTheLittleEndianWord) {
  // Value i: its nibble as Q4_0's, and bit i of qh[0..3] read as a little-endian u32 as bit 4.
  auto value = [](int i) { return (i * 7 + 5) % 32; };
  std::vector<uint8_t> b0(22), b1(24);
  put_f16(b0.data(), 0.5f);
  put_f16(b1.data(), 0.25f);
  put_f16(b1.data() + 2, -3.0f);
  uint32_t qh = 0;
  for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(value(i) >> 4) << i;
  for (int k = 0; k < 4; ++k) b0[2 + k] = b1[4 + k] = static_cast<uint8_t>(qh >> (8 * k));
  for (int i = 0; i < 16; ++i)
    b0[6 + i] = b1[8 + i] = static_cast<uint8_t>((value(i) & 15) | ((value(i + 16) & 15) << 4));
  std::vector<double> want0(32), want1(32);
  for (int i = 0; i < 32; ++i) {
    want0[i] = 0.5 * (value(i) - 16);
    want1[i] = 0.25 * value(i) - 3.0;
  }
  expect_dequantized(QuantType::kQ5_0, b0, want0);
  expect_dequantized(QuantType::kQ5_1, b1, want1);
  // Literal bytes: qh = {0x01, 0x00, 0x01, 0x80} sets bit 4 of values 0, 16 and 31 only.
  std::vector<uint8_t> b(22);
  put_f16(b.data(), 1.0f);
  b[2] = 0x01, b[4] = 0x01, b[5] = 0x80;
  std::vector<double> want(32, -16.0);
  want[0] = want[16] = want[31] = 0.0;
  expect_dequantized(QuantType::kQ5_0, b, want);
}

TEST(QuantDequantizeTest, Q5_KFifthBitPlaneOverQ4_KScales) {
  // Q4_K's 12 scale bytes (QuantDequantizeTest.Q4_KScales...): the same (scale, min) per sub-block.
  const uint8_t s[12] = {0xC1, 0x42, 0x83, 0x3F, 0x05, 0x86, 0x47, 0xC8, 0x21, 0x13, 0xF0, 0x0C};
  const int sc[8] = {1, 2, 3, 63, 49, 19, 32, 12};
  const int mn[8] = {5, 6, 7, 8, 2, 33, 31, 48};
  auto value = [](int e) { return (e * 11 + 7) % 32; };
  std::vector<uint8_t> b(176);
  put_f16(b.data(), 0.5f);
  put_f16(b.data() + 2, 0.125f);
  std::memcpy(b.data() + 4, s, 12);
  // qh[l] bit j: bit 4 of value 32j + l; qs[32c + l]: low nibble of sub-block 2c, high of 2c + 1.
  for (int e = 0; e < 256; ++e) b[16 + e % 32] |= static_cast<uint8_t>((value(e) >> 4) << (e / 32));
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      b[48 + 32 * c + l] = static_cast<uint8_t>((value(64 * c + l) & 15) | ((value(64 * c + 32 + l) & 15) << 4));
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.5 * sc[e / 32] * value(e) - 0.125 * mn[e / 32];
  expect_dequantized(QuantType::kQ5_K, b, want);
  // Literal: qh all zero but qh[5] = 0x81: bit 4 of value 5 (sub-block 0) and 229 (sub-block 7).
  std::memset(b.data() + 16, 0, 32);
  b[16 + 5] = 0x81;
  std::vector<double> got(256);
  dequantize_row_f64(QuantType::kQ5_K, b.data(), 256, got.data());
  for (int e : {5, 229, 37, 6}) {
    const int q = (value(e) & 15) | ((e == 5 || e == 229) ? 16 : 0);
    EXPECT_EQ(got[e], 0.5 * sc[e / 32] * q - 0.125 * mn[e / 32]) << "value " << e;
  }
}

TEST(QuantDequantizeTest, Q3_KEveryScaleEncodingAndTheHighBitMask) {
  // Scale j: low 4 bits from s[j] (j < 8) or the high nibble of s[j - 8]; top 2 bits from bits
  // 2·(j / 4), +1 of s[8 + j % 4]. The bytes give every top-bit value in every position of s[8..11]
  // (s[8] = 11 10 01 00: j = 12, 8, 4, 0 get 3, 2, 1, 0; ...), worked out by hand below.
  const uint8_t s[12] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0xE4, 0x1B, 0x72, 0x8D};
  const int sc[16] = {0, 50, 36, 22, 24, 42, 12, 62, 33, 19, 53, 7, 57, 11, 29, 47};
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q3_k_scale(s, j), sc[j]) << "scale " << j;
  const uint8_t ones[12] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q3_k_scale(ones, j), 63) << "scale " << j;
  // Value e = 128h + 32t + l: low 2 bits at bits 2t of qs[32h + l], bit 2 at bit e / 32 of hmask[l].
  auto value = [](int e) { return (e * 5 + 3) % 8; };
  std::vector<uint8_t> b(110);
  for (int e = 0; e < 256; ++e) {
    b[e % 32] |= static_cast<uint8_t>((value(e) >> 2) << (e / 32));
    b[32 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>((value(e) & 3) << (2 * ((e % 128) / 32)));
  }
  std::memcpy(b.data() + 96, s, 12);
  put_f16(b.data() + 108, -0.75f);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) want[e] = -0.75 * (sc[e / 16] - 32) * (value(e) - 4);
  expect_dequantized(QuantType::kQ3_K, b, want);
  // Literal: qs[0] = 0xE4 gives values 0, 32, 64, 96 the low bits 0, 1, 2, 3; hmask[0] = 0x05 sets
  // bit 2 of values 0 and 64 only: q = 4, 1, 6, 3, i.e. q − 4 = 0, −3, 2, −1.
  std::memset(b.data(), 0, 96);
  b[0] = 0x05;
  b[32] = 0xE4;
  std::vector<double> got(256);
  dequantize_row_f64(QuantType::kQ3_K, b.data(), 256, got.data());
  EXPECT_EQ(got[0], 0.0);
  EXPECT_EQ(got[32], -0.75 * (sc[2] - 32) * -3);
  EXPECT_EQ(got[64], -0.75 * (sc[4] - 32) * 2);
  EXPECT_EQ(got[96], -0.75 * (sc[6] - 32) * -1);
  EXPECT_EQ(got[128], -0.75 * (sc[8] - 32) * -4);  // hmask[0] bit 4 clear, qs[32] all zero
}

TEST(QuantDequantizeTest, Q2_KScaleAndMinNibblesAndTwoBitPlanes) {
  // scales[j]: scale in the low nibble, min in the high one; value e at Q3_K's 2-bit position.
  auto value = [](int e) { return (e * 3 + 1) % 4; };
  std::vector<uint8_t> b(84);
  for (int j = 0; j < 16; ++j) b[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  for (int e = 0; e < 256; ++e)
    b[16 + 32 * (e / 128) + e % 32] |= static_cast<uint8_t>(value(e) << (2 * ((e % 128) / 32)));
  put_f16(b.data() + 80, 0.5f);
  put_f16(b.data() + 82, 0.25f);
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.5 * (e / 16) * value(e) - 0.25 * (15 - e / 16);
  expect_dequantized(QuantType::kQ2_K, b, want);
  // Literal: scales[3] = 0xA7 is scale 7, min 10 for values 48..63; qs[16 + 16] = 0x1B puts
  // 3, 2, 1, 0 in values 16, 48, 80, 112.
  b[3] = 0xA7;
  b[16 + 16] = 0x1B;
  std::vector<double> got(256);
  dequantize_row_f64(QuantType::kQ2_K, b.data(), 256, got.data());
  EXPECT_EQ(got[16], 0.5 * 1 * 3 - 0.25 * 14);
  EXPECT_EQ(got[48], 0.5 * 7 * 2 - 0.25 * 10);
  EXPECT_EQ(got[80], 0.5 * 5 * 1 - 0.25 * 10);
  EXPECT_EQ(got[112], 0.5 * 7 * 0 - 0.25 * 8);
}

TEST(QuantDequantizeTest, IQ4_NLEveryTableValue) {
  EXPECT_EQ(std::vector<int>(std::begin(kIq4nlValues), std::end(kIq4nlValues)),
            (std::vector<int>{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}));
  std::vector<uint8_t> b(18);
  put_f16(b.data(), -0.25f);
  for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<uint8_t>(i | ((15 - i) << 4));
  std::vector<double> want(32);
  for (int i = 0; i < 32; ++i) want[i] = -0.25 * kIq4nlValues[i < 16 ? i : 31 - i];
  expect_dequantized(QuantType::kIQ4_NL, b, want);
}

TEST(QuantDequantizeTest, IQ4_XSScalesHighAndLowBits) {
  // ls_j = ((scales_l[j / 2] >> 4·(j % 2)) & 15) | ((scales_h >> 2j) & 3) << 4. scales_h = 0xE41B
  // (bytes 0x1B, 0xE4) gives top bits 3, 2, 1, 0, 0, 1, 2, 3; scales_l's nibbles 0, 15, 13, 0, 10,
  // 8, 5, 15: ls = 48, 47, 29, 0, 10, 24, 37, 63.
  const int ls[8] = {48, 47, 29, 0, 10, 24, 37, 63};
  auto index = [](int e) { return (e * 5 + 2) % 16; };
  std::vector<uint8_t> b(136);
  put_f16(b.data(), 0.125f);
  b[2] = 0x1B, b[3] = 0xE4;
  b[4] = 0xF0, b[5] = 0x0D, b[6] = 0x8A, b[7] = 0xF5;
  // qs[16j + l]: value 32j + l in the low nibble, 32j + 16 + l in the high one.
  for (int j = 0; j < 8; ++j)
    for (int l = 0; l < 16; ++l)
      b[8 + 16 * j + l] = static_cast<uint8_t>(index(32 * j + l) | (index(32 * j + 16 + l) << 4));
  std::vector<double> want(256);
  for (int e = 0; e < 256; ++e) want[e] = 0.125 * (ls[e / 32] - 32) * kIq4nlValues[index(e)];
  expect_dequantized(QuantType::kIQ4_XS, b, want);
  QuantBlockFields f;
  unpack_block(QuantType::kIQ4_XS, b.data(), &f);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(f.sc[j], ls[j]) << "sub-block " << j;
}

TEST(QuantDequantizeTest, Q3_KAndIQ4_XSZerosCarryGgmlsSign) {
  // ggml multiplies the sub-block scale first: d·(sc − 32) = +0 for sc = 32, and +0 times a negative
  // q or table value is −0. Same value, and the float32 decoder keeps even that sign.
  std::vector<uint8_t> q3(110), xs(136);
  put_f16(q3.data() + 108, 1.0f);
  std::memset(q3.data() + 96, 0, 8);
  q3[96 + 8] = q3[96 + 9] = q3[96 + 10] = q3[96 + 11] = 0xAA;  // every scale's top bits 2: sc = 32
  std::vector<float> out(256);
  dequantize_row_f32(QuantType::kQ3_K, q3.data(), 256, out.data());  // q = 0: q − 4 = −4
  for (float v : out) ASSERT_EQ(test::bits_of(v), 0x80000000u);
  put_f16(xs.data(), 1.0f);
  xs[2] = xs[3] = 0xAA;                                                // every ls = 32
  dequantize_row_f32(QuantType::kIQ4_XS, xs.data(), 256, out.data());  // index 0: −127
  for (float v : out) ASSERT_EQ(test::bits_of(v), 0x80000000u);
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
//   Q5_0  as Q4_0: one step |d| ≈ amax/16
//   Q5_1  as Q4_1 with 31 steps: (max−min)/62, plus the f16 rounding of d and m (32 · 2^-11)
//   Q5_K  as Q4_K with 31 steps: amax/31 + 16·d + dmin/2
//   Q2_K  as Q4_K with 3 steps and 4-bit scales: amax/3 + 2·d + dmin/2
//   Q3_K  the step t = d·(sc−32) is within |d| of s = v/−4 (rounding, or clamping 32 to 31); the
//         short side of the grid ends at 3|t| against values up to 4|s|: |t| + 4·|d|·(1 + 2^-10)
//         ≤ amax/4 + 6|d|
//   IQ4_NL the widest gap of the table is 24 (half: 12·|d|); values on the +113 side reach 127·|d|
//         (plus f16 rounding): 14.1·|d|
//   IQ4_XS as IQ4_NL against the step t (within |d| of s = v/−127, as Q3_K), values up to 127·|s|:
//         14·|t| + 130·|d| ≤ 14·amax/127 + 145·|d|
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
    case QuantType::kQ5_0:
      for (int q = 0; q < 32; ++q) g.push_back(d * (q - 16));
      break;
    case QuantType::kQ5_1:
      for (int q = 0; q < 32; ++q) g.push_back(d * q + m);
      break;
    case QuantType::kQ5_K:
      for (int q = 0; q < 32; ++q) g.push_back(d * f.sc[i / 32] * q - m * f.mins[i / 32]);
      break;
    case QuantType::kQ3_K:
      for (int q = 0; q < 8; ++q) g.push_back(d * (f.sc[i / 16] - 32) * (q - 4));
      break;
    case QuantType::kQ2_K:
      for (int q = 0; q < 4; ++q) g.push_back(d * f.sc[i / 16] * q - m * f.mins[i / 16]);
      break;
    case QuantType::kIQ4_NL:
      for (int v : kIq4nlValues) g.push_back(d * v);
      break;
    case QuantType::kIQ4_XS:
      for (int v : kIq4nlValues) g.push_back(d * (f.sc[i / 32] - 32) * v);
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
          case QuantType::kQ5_0: bound = std::fabs(d) * (1 + 0x1p-8); break;
          case QuantType::kQ5_1:
            bound = (hi - lo) / 62 * (1 + 0x1p-8) + 32 * 0x1p-11 * (std::fabs(hi - lo) + std::fabs(m)) + 0x1p-24;
            break;
          case QuantType::kQ5_K: bound = amax / 31 + 16 * std::fabs(d) + std::fabs(m) / 2; break;
          case QuantType::kQ2_K: bound = amax / 3 + 2 * std::fabs(d) + std::fabs(m) / 2; break;
          case QuantType::kQ3_K: bound = amax / 4 + 6 * std::fabs(d); break;
          case QuantType::kIQ4_NL: bound = 14.1 * std::fabs(d); break;
          case QuantType::kIQ4_XS: bound = 14 * amax / 127 + 145 * std::fabs(d); break;
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

// Values already on a grid the rules pick come back exactly: the rules' scale choices, by hand.
TEST(QuantizeTest, ValuesOnTheChosenGridComeBackExactly) {
  // Q5_0: v = −8 → d = f16(−8 / −16) = 0.5, so every multiple of 0.5 in [−8, 7.5] is on the grid.
  // IQ4_NL: v = −63.5 = 0.5·(−127) → d = 0.5, every 0.5·kv on the grid.
  std::vector<float> q5(32), nl(32);
  for (int i = 0; i < 32; ++i) {
    q5[i] = 0.5f * static_cast<float>(i - 16);
    nl[i] = 0.5f * kIq4nlValues[(i * 7) % 16];
  }
  nl[3] = -63.5f;
  // Q3_K: sub-block j holds (j + 1)·{−4..3}/4 with its −4 end first: s_j = (j + 1)/4, the largest
  // s = 4 → d = f16(4 / −32) = −0.125, sc_j − 32 = −2(j + 1), the step d·(sc_j − 32) = (j + 1)/4.
  // IQ4_XS: sub-block j holds (j + 1)·kv/4 with −127·(j + 1)/4 present: s_j = (j + 1)/4 likewise.
  std::vector<float> q3(256), xs(256);
  for (int e = 0; e < 256; ++e) {
    const float step = static_cast<float>(e / 16 + 1) / 4;
    q3[e] = step * static_cast<float>(e % 8 - 4);
    const float xs_step = static_cast<float>(e / 32 + 1) / 4;
    xs[e] = xs_step * kIq4nlValues[e % 32 == 0 ? 0 : (e * 5) % 16];
  }
  for (const auto& [t, x] : {std::pair{QuantType::kQ5_0, &q5}, std::pair{QuantType::kIQ4_NL, &nl},
                             std::pair{QuantType::kQ3_K, &q3}, std::pair{QuantType::kIQ4_XS, &xs}}) {
    const int64_t k = static_cast<int64_t>(x->size());
    std::vector<uint8_t> bytes(static_cast<size_t>(quant_row_bytes(t, k)));
    quantize_row(t, x->data(), k, bytes.data());
    std::vector<double> back(x->size());
    dequantize_row_f64(t, bytes.data(), k, back.data());
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(back[i], (*x)[i]) << label(t) << " element " << i;
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
      // Every format keeps its bytes and adds none, but three that hold their packed scales as
      // whole bytes (quant_gemm.h).
      EXPECT_EQ(static_cast<int64_t>(p.data.size()), p.num_panels() * (k / f.block_size) * quant_panel_block_bytes(t));
      if (t != QuantType::kIQ4_XS && t != QuantType::kQ3_K && t != QuantType::kQ2_K) {
        EXPECT_EQ(static_cast<int64_t>(p.data.size()), p.num_panels() * kPanelWidth * row_bytes) << "no added bytes";
      }
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

TEST(QuantBlockTest, PackBlockIsUnpackBlocksInverseByteForByte) {
  Rng rng(5);
  for (QuantType t : kAllQuant) {
    const QuantFormat& f = quant_format(t);
    const std::vector<uint8_t> bytes = random_rows(rng, t, 8, 4 * f.block_size);
    std::vector<uint8_t> again(static_cast<size_t>(f.block_bytes));
    for (size_t b = 0; b + f.block_bytes <= bytes.size(); b += static_cast<size_t>(f.block_bytes)) {
      QuantBlockFields fields;
      unpack_block(t, bytes.data() + b, &fields);
      pack_block(t, fields, again.data());
      ASSERT_TRUE(std::equal(again.begin(), again.end(), bytes.begin() + static_cast<std::ptrdiff_t>(b)))
          << label(t) << " block at byte " << b;
    }
    EXPECT_TRUE(quant_gemm_supported(t)) << label(t);
  }
  EXPECT_FALSE(quant_gemm_supported(QuantType::kNone));
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
