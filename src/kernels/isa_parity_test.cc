// Every kernel on every instruction-set path this CPU runs, against the portable path, compared as
// bit patterns: awkward sizes (K not a multiple of 16 or 32, odd N, M = 1…70, head_dim 64 and 128,
// short and long contexts) and adversarial values (near overflow, subnormal, signed zeros, ±inf).
// One NaN-producing case is the exception: both paths must give NaN there, payloads aside (x86
// propagates a NaN operand's payload in every path, but which operand a commutative instruction
// names first is the compiler's choice).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"

namespace ditto {
namespace {

using test::BitsEqual;
using test::Rng;

std::vector<Isa> vector_paths() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (cpu_supports(isa)) out.push_back(isa);
  return out;
}

// Bits equal, except that NaN equals any NaN.
::testing::AssertionResult SameBitsOrBothNan(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (std::bit_cast<uint32_t>(want[i]) != std::bit_cast<uint32_t>(got[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": portable " << want[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(want[i])
             << "), vector " << got[i] << " (0x" << std::bit_cast<uint32_t>(got[i]) << ")";
  }
  return ::testing::AssertionSuccess();
}

// Runs `compute` on the portable path and on every vector path; expects identical bits. With
// both_bf16_paths (computations with a bf16-weight GEMM) on a CPU with AVX512-BF16, the avx512
// path runs twice: with VDPBF16PS and with its FMA emulation.
void expect_all_paths_equal(const std::string& what, const std::function<std::vector<float>()>& compute,
                            bool nan_payloads_free = false, bool both_bf16_paths = false) {
  std::vector<float> want;
  {
    ScopedIsa s(Isa::kScalar);
    want = compute();
  }
  for (Isa isa : vector_paths()) {
    for (bool bf16 : {true, false}) {
      if (bf16 && !(both_bf16_paths && isa == Isa::kAvx512 && cpu_has_avx512_bf16())) continue;
      ScopedIsa s(isa);
      ScopedAvx512Bf16 b(bf16);
      const std::string path = std::string(isa_name(isa)) + (bf16 ? "+bf16" : "");
      const std::vector<float> got = compute();
      if (nan_payloads_free) {
        EXPECT_TRUE(SameBitsOrBothNan(want, got)) << what << " on " << path;
      } else {
        EXPECT_TRUE(BitsEqual(want, got)) << what << " on " << path;
      }
    }
  }
}

// A float drawn to hit the edges: normal values of many magnitudes, subnormals, signed zeros,
// values near FLT_MAX, and (if allow_inf) infinities.
float adversarial(Rng& rng, bool allow_inf = false) {
  switch (rng.next() % 10) {
    case 0: return std::bit_cast<float>(static_cast<uint32_t>(rng.next() & 0x807fffffu));  // subnormal/±0
    case 1: return (rng.next() & 1) ? 0.0f : -0.0f;
    case 2: return rng.uniform(-1.0f, 1.0f) * 3.0e38f;  // near overflow
    case 3: return allow_inf ? ((rng.next() & 1) ? INFINITY : -INFINITY) : 1.0f;
    case 4: return rng.normal() * std::ldexp(1.0f, static_cast<int>(rng.uniform_int(-140, 120)));
    default: return rng.normal() * 4.0f;
  }
}

std::vector<float> adversarial_vector(Rng& rng, size_t n, bool allow_inf = false) {
  std::vector<float> v(n);
  for (float& x : v) x = adversarial(rng, allow_inf);
  return v;
}

TEST(IsaParityTest, ThisMachineHasAVectorPathToCompare) {
  // On an x86-64 CPU without AVX2 only the portable path exists and this suite compares nothing;
  // say so rather than pass silently.
  if (vector_paths().empty()) GTEST_SKIP() << "no AVX2/AVX-512 on this CPU: only the portable path runs";
  std::printf("[ paths    ] portable vs %s%s\n", std::string(isa_name(vector_paths()[0])).c_str(),
              vector_paths().size() > 1 ? " and avx512" : "");
}

TEST(IsaParityTest, Gemm) {
  Rng rng(101);
  ThreadPool pool(2);
  for (DType dtype : test::kAllDTypes) {
    for (int64_t k : {1, 15, 16, 17, 31, 33, 100, 1023}) {
      for (int64_t n : {1, 7, 16, 31, 33, 129, 257}) {
        const test::StoredMatrix w = test::random_matrix(rng, dtype, n, k);
        const PackedMatrix p = pack_matrix(std::span<const MatrixSource>(std::vector{w.source()}));
        for (int64_t m : {1, 2, 5, 6, 7, 13, 70}) {
          const int64_t ldx = k + 1, ldy = n + 3;
          std::vector<float> x(static_cast<size_t>(m * ldx));
          for (float& v : x) v = rng.next() % 8 == 0 ? adversarial(rng) * 1e-30f : rng.normal();
          expect_all_paths_equal(
              std::string("gemm ") + test::dtype_label(dtype) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                  " k=" + std::to_string(k),
              [&] {
                std::vector<float> y(static_cast<size_t>(m * ldy), -1.0f);
                gemm(x.data(), m, ldx, p, y.data(), ldy, m % 2 ? &pool : nullptr);
                return y;
              },
              /*nan_payloads_free=*/false, /*both_bf16_paths=*/dtype == DType::kBF16);
        }
      }
    }
  }
}

TEST(IsaParityTest, GemmNearOverflowAndSubnormalProducts) {
  Rng rng(102);
  const int64_t n = 45, k = 77, m = 9;
  std::vector<float> wf(static_cast<size_t>(n * k));
  for (float& v : wf) v = adversarial(rng);
  const MatrixSource src{wf.data(), DType::kF32, n, k};
  const PackedMatrix p = pack_matrix(std::span<const MatrixSource>(&src, 1));
  const std::vector<float> x = adversarial_vector(rng, static_cast<size_t>(m * k));
  expect_all_paths_equal(
      "gemm adversarial",
      [&] {
        std::vector<float> y(static_cast<size_t>(m * n));
        gemm(x.data(), m, k, p, y.data(), n, nullptr);
        return y;
      },
      /*nan_payloads_free=*/true);
}

TEST(IsaParityTest, Bf16GemmOnAdversarialValues) {
  // bf16 weights and activations with subnormals (flushed by the pair step), signed zeros, values
  // near overflow, infinities and NaN (stored as 0x7FC00000 on every path): identical bits.
  Rng rng(103);
  ThreadPool pool(2);
  for (int64_t k : {1, 2, 3, 64, 77, 301}) {  // 301: several of the emulation's unpacked blocks
    const int64_t n = 45;
    std::vector<uint16_t> wb(static_cast<size_t>(n * k));
    for (uint16_t& v : wb) v = rng.next() % 50 == 0 ? 0x7fc1 : f32_to_bf16(adversarial(rng, /*allow_inf=*/true));
    const MatrixSource src{wb.data(), DType::kBF16, n, k};
    const PackedMatrix p = pack_matrix(std::span<const MatrixSource>(&src, 1));
    for (int64_t m : {1, 7, 130}) {  // 130: the emulation unpacks each weight block once
      std::vector<float> x = adversarial_vector(rng, static_cast<size_t>(m * k), /*allow_inf=*/true);
      for (float& v : x)
        if (rng.next() % 40 == 0) v = std::bit_cast<float>(0xffc00123u);
      expect_all_paths_equal(
          "bf16 gemm adversarial k=" + std::to_string(k) + " m=" + std::to_string(m),
          [&] {
            std::vector<float> y(static_cast<size_t>(m * n));
            gemm(x.data(), m, k, p, y.data(), n, m > 1 ? &pool : nullptr);
            return y;
          },
          /*nan_payloads_free=*/false, /*both_bf16_paths=*/true);
    }
  }
}

// ---- Quantized GEMM: avx2, avx512 with VNNI (vpdpbusd) and avx512 without (vpmaddwd) ---------------

struct QuantPath {
  Isa isa;
  bool vnni;
  const char* name;
};

std::vector<QuantPath> quant_paths() {
  std::vector<QuantPath> out;
  if (cpu_supports(Isa::kAvx2)) out.push_back({Isa::kAvx2, false, "avx2"});
  if (cpu_supports(Isa::kAvx512)) {
    if (cpu_has_avx512_vnni()) out.push_back({Isa::kAvx512, true, "avx512+vnni"});
    out.push_back({Isa::kAvx512, false, "avx512 without vnni"});
  }
  return out;
}

// Outputs are compared as bits, NaN included: every path writes NaN as the canonical 0x7FC00000.
void expect_quant_paths_equal(const std::string& what, const std::function<std::vector<float>()>& compute) {
  std::vector<float> want;
  {
    ScopedIsa s(Isa::kScalar);
    want = compute();
  }
  for (const QuantPath& path : quant_paths()) {
    ScopedIsa s(path.isa);
    ScopedAvx512Vnni v(path.vnni);
    ASSERT_EQ(avx512_vnni_enabled(), path.vnni);
    EXPECT_TRUE(BitsEqual(want, compute())) << what << " on " << path.name;
  }
}

constexpr QuantType kQuantTypes[] = {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,   QuantType::kQ4_K,
                                     QuantType::kQ6_K, QuantType::kQ5_0, QuantType::kQ5_1,   QuantType::kQ5_K,
                                     QuantType::kQ3_K, QuantType::kQ2_K, QuantType::kIQ4_NL, QuantType::kIQ4_XS};

// f16 bits of a scale drawn to hit the edges: ordinary, tiny normal, subnormal, zero, near the f16
// maximum, ±inf, NaN.
uint16_t adversarial_f16(Rng& rng) {
  switch (rng.next() % 12) {
    case 0: return static_cast<uint16_t>(rng.next() & 0x83ff);  // subnormal or ±0
    case 1: return 0x0400;                                      // smallest normal
    case 2: return 0x7bff;                                      // 65504
    case 3: return rng.next() % 2 ? 0x7c00 : 0xfc00;            // ±inf
    case 4: return 0x7e00;                                      // NaN
    case 5: return static_cast<uint16_t>(rng.next());           // any bits
    default: return f32_to_f16(rng.normal() * 0.01f);
  }
}

// n rows of GGML blocks: `mode` 0 = ordinary scales, 1 = adversarial scales, 2 = every integer field
// at an extreme (Q8_0 −128/127, nibbles 0/15, Q6_K 0/63, 6-bit scales 63, int8 scales −128/127),
// 3 = all zero bytes.
std::vector<uint8_t> quant_rows(Rng& rng, QuantType t, int64_t n, int64_t k, int mode) {
  const QuantFormat& f = quant_format(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * quant_row_bytes(t, k)));
  if (mode == 3) return bytes;
  for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng.next());
  for (int64_t b = 0; b < n * (k / f.block_size); ++b) {
    uint8_t* blk = bytes.data() + b * f.block_bytes;
    if (mode == 2) {
      const uint8_t hi = rng.next() % 2 ? 0xff : 0x00;
      std::fill(blk, blk + f.block_bytes, hi);
      if (t == QuantType::kQ8_0)
        for (int i = 0; i < 32; ++i) blk[2 + i] = rng.next() % 2 ? 0x80 : 0x7f;  // −128 / 127
      if (t == QuantType::kQ6_K)
        for (int i = 0; i < 16; ++i) blk[192 + i] = rng.next() % 2 ? 0x80 : 0x7f;
    }
    uint16_t d = mode == 1 ? adversarial_f16(rng) : f32_to_f16(rng.normal() * 0.01f);
    uint16_t m = mode == 1 ? adversarial_f16(rng) : f32_to_f16(rng.normal() * 0.01f);
    if (mode == 2) d = m = rng.next() % 2 ? 0x7bff : 0xfbff;
    const int d_at = t == QuantType::kQ6_K ? 208 : t == QuantType::kQ3_K ? 108 : t == QuantType::kQ2_K ? 80 : 0;
    std::memcpy(blk + d_at, &d, 2);
    if (t == QuantType::kQ4_1 || t == QuantType::kQ4_K || t == QuantType::kQ5_1 || t == QuantType::kQ5_K)
      std::memcpy(blk + 2, &m, 2);
    if (t == QuantType::kQ2_K) std::memcpy(blk + 82, &m, 2);
  }
  return bytes;
}

// Activations: ordinary values with outliers, blocks whose amax makes x·(1/d) land on .5 ties
// (amax = 127·2^e, x = (j + 1/2)·2^e), tiny blocks (d below FLT_MIN: quantized to zero), blocks of
// huge values, all-zero blocks, blocks of one value (every quantized activation +127 or −127, where
// AVX2's int16 sums of 4-bit and 6-bit products reach their bound), and occasionally a non-finite
// value.
std::vector<float> quant_activations(Rng& rng, int64_t m, int64_t ld, int64_t k, int64_t block, bool non_finite) {
  std::vector<float> x(static_cast<size_t>(m * ld), 0.0f);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t b = 0; b < k / block; ++b) {
      float* xb = x.data() + r * ld + b * block;
      const uint64_t kind = rng.next() % 8;
      const float e = std::ldexp(1.0f, static_cast<int>(rng.uniform_int(-20, 20)));
      for (int64_t i = 0; i < block; ++i) {
        switch (kind) {
          case 0: xb[i] = (static_cast<float>(rng.uniform_int(-127, 126)) + 0.5f) * e; break;
          case 1: xb[i] = rng.normal() * 1e-38f; break;
          case 2: xb[i] = rng.normal() * 1e37f; break;
          case 3: xb[i] = 0.0f; break;
          case 4: xb[i] = (b % 2 ? -1.0f : 1.0f) * e; break;  // every q ±127: the int16 sums' bound
          default: xb[i] = rng.next() % 40 == 0 ? rng.normal() * 50.0f : rng.normal(); break;
        }
      }
      if (kind == 0) xb[rng.uniform_int(0, block - 1)] = (rng.next() % 2 ? 127.0f : -127.0f) * e;
    }
    if (non_finite && rng.next() % 3 == 0) {
      const float bad[] = {NAN, INFINITY, -INFINITY};
      x[static_cast<size_t>(r * ld + rng.uniform_int(0, k - 1))] = bad[rng.next() % 3];
    }
  }
  return x;
}

TEST(IsaParityTest, QuantizedGemm) {
  if (quant_paths().empty()) GTEST_SKIP() << "no vector path on this CPU";
  Rng rng(110);
  ThreadPool pool(2);
  for (QuantType t : kQuantTypes) {
    const int64_t bs = quant_format(t).block_size;
    for (int64_t blocks : {1, 2, 3, 17}) {
      const int64_t k = blocks * bs;
      for (int64_t n : {1, 7, 16, 31, 33, 129}) {
        for (int mode = 0; mode < 4; ++mode) {
          const std::vector<uint8_t> bytes = quant_rows(rng, t, n, k, mode);
          const MatrixSource src{bytes.data(), DType::kF32, n, k, t};
          const PackedMatrix p = pack_matrix({&src, 1});
          for (int64_t m : {1, 2, 4, 5, 7, 13, 70}) {
            if (blocks == 17 && m > 7 && n > 33) continue;  // keeps the portable path's time in check
            const int64_t ldx = k + 1, ldy = n + 3;
            const std::vector<float> x = quant_activations(rng, m, ldx, k, bs, mode == 1);
            expect_quant_paths_equal(std::string("quantized gemm ") + quant_format(t).name.data() + " mode " +
                                         std::to_string(mode) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                         " k=" + std::to_string(k),
                                     [&] {
                                       std::vector<float> y(static_cast<size_t>(m * ldy), -1.0f);
                                       gemm(x.data(), m, ldx, p, y.data(), ldy, m % 2 ? &pool : nullptr);
                                       return y;
                                     });
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(IsaParityTest, RmsNorm) {
  Rng rng(103);
  for (int64_t n : {1, 5, 16, 17, 64, 127, 128, 1000, 1024, 4096}) {
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t rows = 3;
      std::vector<float> x = trial == 0 ? adversarial_vector(rng, static_cast<size_t>(rows * n))
                                        : rng.normal_vector(static_cast<size_t>(rows * n), trial == 1 ? 1e-20f : 3.0f);
      const std::vector<float> w = rng.normal_vector(static_cast<size_t>(n));
      expect_all_paths_equal(
          "rms_norm n=" + std::to_string(n),
          [&] {
            std::vector<float> y(x.size());
            rms_norm(x.data(), rows, n, n, w.data(), 1e-6f, y.data(), n);
            return y;
          },
          trial == 0);
    }
  }
}

TEST(IsaParityTest, SiluMulOverOneHundredMillionInputs) {
  // Every 41st float32 bit pattern (≈ 1.05·10^8 values: all exponents, both signs, subnormals, ±inf,
  // NaN) through silu(g)·u with u = 1, i.e. through the vector exp; plus random u.
  constexpr uint64_t kStride = 41;
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> gate_up(2 * kChunk);
  uint64_t total = 0;
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += kStride * kChunk) {
    int64_t n = 0;  // gate in [0, n), up = 1 in [n, 2n): one row of silu_mul's layout
    for (uint64_t b = start; n < kChunk && b < (uint64_t{1} << 32); b += kStride, ++n)
      gate_up[n] = std::bit_cast<float>(static_cast<uint32_t>(b));
    std::fill(gate_up.begin() + n, gate_up.begin() + 2 * n, 1.0f);
    total += static_cast<uint64_t>(n);
    expect_all_paths_equal(
        "silu_mul from bit pattern " + std::to_string(start),
        [&] {
          std::vector<float> out(static_cast<size_t>(n));
          silu_mul(gate_up.data(), 1, n, 2 * n, out.data(), n);
          return out;
        },
        /*nan_payloads_free=*/true);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GE(total, uint64_t{100000000});
  std::printf("[ measured ] silu_mul: %llu inputs identical on every path\n", static_cast<unsigned long long>(total));
}

TEST(IsaParityTest, SiluMulRandomShapes) {
  Rng rng(104);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 3072}) {
    const int64_t rows = 4, ld = 2 * n + 3;
    std::vector<float> gu(static_cast<size_t>(rows * ld));
    for (float& v : gu) v = rng.next() % 4 == 0 ? adversarial(rng, true) : rng.normal() * 8.0f;
    expect_all_paths_equal(
        "silu_mul n=" + std::to_string(n),
        [&] {
          std::vector<float> out(static_cast<size_t>(rows * n));
          silu_mul(gu.data(), rows, n, ld, out.data(), n);
          return out;
        },
        true);
  }
}

TEST(IsaParityTest, GeluTanhMulOverFortyMillionInputs) {
  // Every 97th float32 bit pattern (≈ 4.4·10^7 values: all exponents, both signs, subnormals, ±inf,
  // NaN, and x² overflowing) through gelu_tanh(g)·u with u = 1; then random shapes with outliers.
  constexpr uint64_t kStride = 97;
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> gate_up(2 * kChunk);
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += kStride * kChunk) {
    int64_t n = 0;
    for (uint64_t b = start; n < kChunk && b < (uint64_t{1} << 32); b += kStride, ++n)
      gate_up[n] = std::bit_cast<float>(static_cast<uint32_t>(b));
    std::fill(gate_up.begin() + n, gate_up.begin() + 2 * n, 1.0f);
    expect_all_paths_equal(
        "gelu_tanh_mul from bit pattern " + std::to_string(start),
        [&] {
          std::vector<float> out(static_cast<size_t>(n));
          gelu_tanh_mul(gate_up.data(), 1, n, 2 * n, out.data(), n);
          return out;
        },
        /*nan_payloads_free=*/true);
    if (::testing::Test::HasFailure()) break;
  }
  Rng rng(109);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 2048}) {
    const int64_t rows = 4, ld = 2 * n + 3;
    std::vector<float> gu(static_cast<size_t>(rows * ld));
    for (float& v : gu) v = rng.next() % 4 == 0 ? adversarial(rng, true) : rng.normal() * 8.0f;
    expect_all_paths_equal(
        "gelu_tanh_mul n=" + std::to_string(n),
        [&] {
          std::vector<float> out(static_cast<size_t>(rows * n));
          gelu_tanh_mul(gu.data(), rows, n, ld, out.data(), n);
          return out;
        },
        true);
  }
}

TEST(IsaParityTest, LogSoftmaxAndSoftmax) {
  Rng rng(105);
  for (int64_t n : {1, 2, 15, 16, 17, 33, 1000, 151936}) {
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<float> x = rng.normal_vector(static_cast<size_t>(n), trial == 0 ? 1.0f : 40.0f);
      if (trial == 2)
        for (float& v : x) v = rng.next() % 3 == 0 ? -INFINITY : (rng.next() % 5 == 0 ? -0.0f : v);
      expect_all_paths_equal("log_softmax n=" + std::to_string(n), [&] {
        std::vector<float> out(x.size());
        log_softmax_row(x.data(), n, out.data());
        return out;
      });
      expect_all_paths_equal("softmax n=" + std::to_string(n), [&] {
        std::vector<float> out(x.size());
        softmax_row(x.data(), n, out.data());
        return out;
      });
    }
  }
}

TEST(IsaParityTest, Rope) {
  Rng rng(106);
  for (int64_t head_dim : {2, 16, 34, 64, 128, 256}) {
    const int64_t heads = 5;
    const std::vector<float> x0 = adversarial_vector(rng, static_cast<size_t>(heads * head_dim));
    const std::vector<float> cs = rng.normal_vector(static_cast<size_t>(head_dim));
    expect_all_paths_equal(
        "rope head_dim=" + std::to_string(head_dim),
        [&] {
          std::vector<float> x = x0;
          rope_apply(x.data(), heads, head_dim, cs.data());
          return x;
        },
        true);
  }
}

TEST(IsaParityTest, PagedAttention) {
  Rng rng(107);
  ThreadPool pool(2);
  for (int64_t head_dim : {64, 128, 40}) {
    for (int64_t context : {1, 31, 32, 33, 200, 700}) {
      const int64_t num_heads = 4, num_kv_heads = 2, block_size = 16;
      const int64_t kv_dim = num_kv_heads * head_dim;
      const int64_t blocks = (context + block_size - 1) / block_size;
      // Blocks in reverse physical order, so slots are not positions.
      std::vector<int32_t> table(static_cast<size_t>(blocks));
      for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(blocks - 1 - b);
      std::vector<uint16_t> k(static_cast<size_t>(blocks * block_size * kv_dim));
      std::vector<uint16_t> v(k.size());
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = f32_to_bf16(rng.normal() * (i % 97 == 0 ? 30.0f : 1.0f));
        v[i] = f32_to_bf16(rng.next() % 50 == 0 ? adversarial(rng) : rng.normal());
      }
      const KvCacheLayer cache{k.data(), v.data(), blocks * block_size};
      // Queries at several positions of the one sequence (a chunk of prefill plus the last token).
      std::vector<int32_t> positions;
      for (int64_t p = std::max<int64_t>(0, context - 5); p < context; ++p)
        positions.push_back(static_cast<int32_t>(p));
      positions.push_back(0);
      const auto num_tokens = static_cast<int64_t>(positions.size());
      const std::vector<int32_t> token_seq(positions.size(), 0);
      const std::vector<float> q = rng.normal_vector(static_cast<size_t>(num_tokens * num_heads * head_dim), 2.0f);
      const AttentionShape shape{num_heads, num_kv_heads, head_dim, block_size,
                                 static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)))};
      expect_all_paths_equal(
          "attention head_dim=" + std::to_string(head_dim) + " context=" + std::to_string(context),
          [&] {
            std::vector<float> out(q.size());
            paged_attention(q.data(), num_heads * head_dim, positions.data(), token_seq.data(), num_tokens,
                            table.data(), blocks, cache, shape, out.data(), num_heads * head_dim, &pool);
            return out;
          },
          true);
    }
  }
}

// Prefill chunks in position order (query blocks on the paths that have them): a chunk starting
// off a tile boundary, GQA groups 1, 2, 3 and 8, adversarial V and K with outliers.
TEST(IsaParityTest, PagedAttentionPrefillChunks) {
  Rng rng(108);
  ThreadPool pool(2);
  struct HeadShape {
    int64_t num_heads, num_kv_heads;
  };
  for (int64_t head_dim : {64, 128, 40}) {
    for (HeadShape hs : {HeadShape{4, 2}, HeadShape{4, 4}, HeadShape{6, 2}, HeadShape{16, 2}}) {
      for (int64_t context : {40, 300}) {
        for (int64_t window : {0, 9, 70}) {  // sliding windows: first keys inside and across tiles
          const int64_t block_size = 16;
          const int64_t kv_dim = hs.num_kv_heads * head_dim;
          const int64_t blocks = (context + block_size - 1) / block_size;
          std::vector<int32_t> table(static_cast<size_t>(blocks));
          for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>((b * 7) % blocks);
          std::vector<uint16_t> k(static_cast<size_t>(blocks * block_size * kv_dim)), v(k.size());
          for (size_t i = 0; i < k.size(); ++i) {
            k[i] = f32_to_bf16(rng.normal() * (i % 97 == 0 ? 30.0f : 1.0f));
            v[i] = f32_to_bf16(rng.next() % 50 == 0 ? adversarial(rng) : rng.normal());
          }
          const KvCacheLayer cache{k.data(), v.data(), blocks * block_size};
          std::vector<int32_t> positions;  // a chunk from position 37 (mid-tile) to the end, then position 0
          for (int64_t p = 37; p < context; ++p) positions.push_back(static_cast<int32_t>(p));
          positions.push_back(0);
          const auto num_tokens = static_cast<int64_t>(positions.size());
          const std::vector<int32_t> token_seq(positions.size(), 0);
          const int64_t q_dim = hs.num_heads * head_dim;
          const std::vector<float> q = rng.normal_vector(static_cast<size_t>(num_tokens * q_dim), 2.0f);
          const AttentionShape shape{hs.num_heads,
                                     hs.num_kv_heads,
                                     head_dim,
                                     block_size,
                                     static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))),
                                     window};
          expect_all_paths_equal(
              "prefill attention heads " + std::to_string(hs.num_heads) + "/" + std::to_string(hs.num_kv_heads) +
                  " head_dim=" + std::to_string(head_dim) + " context=" + std::to_string(context) +
                  " window=" + std::to_string(window),
              [&] {
                std::vector<float> out(q.size());
                paged_attention(q.data(), q_dim, positions.data(), token_seq.data(), num_tokens, table.data(), blocks,
                                cache, shape, out.data(), q_dim, &pool);
                return out;
              },
              true);
        }
      }
    }
  }
}

TEST(IsaParityTest, WriteKvRoundsToBf16Identically) {
  // Every 97th float32 bit pattern (4.4·10^7 values: ties, subnormals, ±inf, NaN payloads) through
  // the KV write's f32 → bf16 rounding, compared as raw bf16 bits (NaN payloads included).
  constexpr uint64_t kStride = 97;
  constexpr int64_t kChunk = 1 << 20;
  const int64_t kv_dim = 40;  // not a multiple of 16: exercises the tails
  std::vector<float> src(static_cast<size_t>(kChunk));
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += kStride * kChunk) {
    int64_t n = 0;
    for (uint64_t b = start; n < kChunk && b < (uint64_t{1} << 32); b += kStride, ++n)
      src[static_cast<size_t>(n)] = std::bit_cast<float>(static_cast<uint32_t>(b));
    const int64_t tokens = n / kv_dim;
    std::vector<int64_t> slots(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) slots[t] = tokens - 1 - t;
    auto run = [&] {
      std::vector<uint16_t> k(static_cast<size_t>(tokens * kv_dim)), v(k.size());
      write_kv(src.data(), kv_dim, src.data(), kv_dim, slots.data(), tokens, kv_dim, {k.data(), v.data(), tokens});
      return k;
    };
    std::vector<uint16_t> want;
    {
      ScopedIsa s(Isa::kScalar);
      want = run();
    }
    for (Isa isa : vector_paths()) {
      ScopedIsa s(isa);
      ASSERT_TRUE(run() == want) << "write_kv from bit pattern " << start << " on " << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace ditto
