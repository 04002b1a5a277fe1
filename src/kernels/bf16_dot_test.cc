// The bf16 pair step (kernels/bf16_dot.h) on every path against the definition, as bits, over
// 1.05·10^8 random and adversarial inputs: subnormal, zero, infinite and NaN operands; products
// and sums near the float32 underflow threshold 2^-126 (where flushing decides the result), near
// overflow, and random bit patterns. Paths: the portable definition, VDPBF16PS (where the CPU has
// AVX512-BF16), and its AVX-512 and AVX2 FMA emulations under ScopedFlushDenormals. NaN results
// are compared as NaN (the GEMM stores every NaN as 0x7FC00000); all other results bit for bit.
#include "kernels/bf16_dot.h"

#include <gtest/gtest.h>

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/kernel_test_util.h"

namespace ditto {
namespace {

using test::Rng;

constexpr int64_t kInputs = 105'000'000;  // lanes compared per path
constexpr int64_t kBatch = 4096;          // lanes per batch (a multiple of 16)

// One bf16 drawn to hit the edges.
uint16_t adversarial_bf16(Rng& rng) {
  const uint64_t r = rng.next();
  const auto sign = static_cast<uint16_t>((r & 1) << 15);
  const uint64_t b = r >> 1;
  const auto mantissa = static_cast<uint16_t>(b & 0x7f);
  const auto exponent = [&](uint64_t e) { return static_cast<uint16_t>(sign | (e << 7) | mantissa); };
  switch ((b >> 8) % 16) {
    case 0: return static_cast<uint16_t>(sign | mantissa);                           // subnormal or ±0
    case 1: return static_cast<uint16_t>(sign | 0x7f80 | (b >> 20) % 2 * mantissa);  // ±inf or NaN
    case 2: return exponent(1 + (b >> 20) % 4);                                      // just above 2^-126
    case 3: return exponent(1 + (b >> 20) % 40);                                     // small
    case 4: return exponent(0xfe - (b >> 20) % 40);                                  // near overflow
    case 5: return exponent(0x38 + (b >> 20) % 16);                                  // products near 2^-126
    case 6: return static_cast<uint16_t>(b >> 20);                                   // any bits
    default: return exponent(0x70 + (b >> 20) % 24);                                 // ordinary: 2^-15 … 2^8
  }
}

// An accumulator drawn to hit the edges.
float adversarial_acc(Rng& rng) {
  const uint64_t r = rng.next();
  const auto sign = static_cast<uint32_t>((r & 1) << 31);
  const uint64_t b = r >> 1;
  const auto mantissa = static_cast<uint32_t>(b & 0x7fffff);
  const auto exponent = [&](uint64_t e) {
    return std::bit_cast<float>(static_cast<uint32_t>(sign | (e << 23) | mantissa));
  };
  switch ((b >> 24) % 10) {
    case 0: return std::bit_cast<float>(sign | mantissa);  // subnormal or ±0
    case 1: return std::bit_cast<float>(sign);             // ±0
    case 2: return exponent(1 + (b >> 30) % 3);            // just above 2^-126
    case 3: return std::bit_cast<float>(static_cast<uint32_t>(sign | 0x7f800000u | (b >> 30) % 2 * mantissa));
    case 4: return exponent(0xfe - (b >> 30) % 8);  // near overflow
    case 5: return exponent(0x70 + (b >> 30) % 40);
    default: return exponent(1 + (b >> 30) % 253);  // any normal
  }
}

struct Inputs {
  std::vector<float> acc;
  std::vector<uint32_t> x, w;
};

void draw(Rng& rng, Inputs& in) {
  for (int64_t i = 0; i < kBatch; ++i) {
    in.acc[i] = adversarial_acc(rng);
    in.x[i] = adversarial_bf16(rng) | (uint32_t{adversarial_bf16(rng)} << 16);
    in.w[i] = adversarial_bf16(rng) | (uint32_t{adversarial_bf16(rng)} << 16);
  }
}

#if defined(__x86_64__)
DITTO_AVX512_BF16 void native_x16(const Inputs& in, float* out) {
  for (int64_t i = 0; i < kBatch; i += 16)
    _mm512_storeu_ps(out + i, simd::bf16_dot2_native_x16(_mm512_loadu_ps(&in.acc[i]), _mm512_loadu_si512(&in.x[i]),
                                                         _mm512_loadu_si512(&in.w[i])));
}

DITTO_AVX512 void emulated_x16(const Inputs& in, float* out) {
  ScopedFlushDenormals flush;
  for (int64_t i = 0; i < kBatch; i += 16) {
    const __m512i x = _mm512_loadu_si512(&in.x[i]), w = _mm512_loadu_si512(&in.w[i]);
    _mm512_storeu_ps(
        out + i, simd::bf16_dot2_emulated_x16(_mm512_loadu_ps(&in.acc[i]), simd::bf16_odd_x16(x),
                                              simd::bf16_even_x16(x), simd::bf16_odd_x16(w), simd::bf16_even_x16(w)));
  }
}

DITTO_AVX2 void emulated_x8(const Inputs& in, float* out) {
  ScopedFlushDenormals flush;
  for (int64_t i = 0; i < kBatch; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&in.x[i]));
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&in.w[i]));
    _mm256_storeu_ps(
        out + i, simd::bf16_dot2_emulated_x8(_mm256_loadu_ps(&in.acc[i]), simd::bf16_odd_x8(x), simd::bf16_even_x8(x),
                                             simd::bf16_odd_x8(w), simd::bf16_even_x8(w)));
  }
}
#endif

struct Path {
  const char* name;
  void (*run)(const Inputs&, float*);
  int64_t mismatches = 0;
  int64_t nan_payloads = 0;  // both NaN, different payloads (not a mismatch)
};

TEST(Bf16DotTest, EveryPathEqualsTheDefinitionOnAdversarialInputs) {
  std::vector<Path> paths;
#if defined(__x86_64__)
  if (cpu_has_avx512_bf16()) paths.push_back({"vdpbf16ps", native_x16});
  if (cpu_supports(Isa::kAvx512)) paths.push_back({"avx512 fma emulation", emulated_x16});
  if (cpu_supports(Isa::kAvx2)) paths.push_back({"avx2 fma emulation", emulated_x8});
#endif
  if (paths.empty()) GTEST_SKIP() << "no vector path on this CPU: only the portable definition exists";

  Rng rng(20261201);
  Inputs in{std::vector<float>(kBatch), std::vector<uint32_t>(kBatch), std::vector<uint32_t>(kBatch)};
  std::vector<float> want(kBatch), got(kBatch);
  int64_t flushed_results = 0, subnormal_inputs = 0, nan_results = 0, below_min_normal_sums = 0;
  for (int64_t done = 0; done < kInputs; done += kBatch) {
    draw(rng, in);
    for (int64_t i = 0; i < kBatch; ++i) {
      want[i] = bf16_dot2(in.acc[i], in.x[i], in.w[i]);
      // Coverage of the edges that matter, so the comparison cannot pass vacuously.
      const float x1 = bf16_to_f32(static_cast<uint16_t>(in.x[i] >> 16));
      const float w1 = bf16_to_f32(static_cast<uint16_t>(in.w[i] >> 16));
      const float first = std::fma(flush_subnormal(x1), flush_subnormal(w1), flush_subnormal(in.acc[i]));
      if (first != 0.0f && std::fabs(first) < 0x1p-126f) ++flushed_results;
      if (std::fabs(first) >= 0x1p-126f && std::fabs(first) < 0x1p-124f) ++below_min_normal_sums;
      if (x1 != 0.0f && std::fabs(x1) < 0x1p-126f) ++subnormal_inputs;
      if (std::isnan(want[i])) ++nan_results;
    }
    for (Path& path : paths) {
      path.run(in, got.data());
      for (int64_t i = 0; i < kBatch; ++i) {
        if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
        if (std::isnan(got[i]) && std::isnan(want[i])) {
          ++path.nan_payloads;
          continue;
        }
        if (path.mismatches++ < 10)
          ADD_FAILURE() << path.name << ": acc " << std::hex << std::bit_cast<uint32_t>(in.acc[i]) << " x " << in.x[i]
                        << " w " << in.w[i] << " gives " << std::bit_cast<uint32_t>(got[i]) << ", the definition "
                        << std::bit_cast<uint32_t>(want[i]);
      }
    }
  }
  for (const Path& path : paths) {
    std::printf("[ measured ] %s: %" PRId64 " inputs, %" PRId64 " mismatches, %" PRId64 " NaN payload differences\n",
                path.name, kInputs, path.mismatches, path.nan_payloads);
    EXPECT_EQ(path.mismatches, 0) << path.name;
  }
  std::printf("[ coverage ] %" PRId64 " first-step results flushed, %" PRId64 " within 4x of 2^-126, %" PRId64
              " subnormal x, %" PRId64 " NaN results\n",
              flushed_results, below_min_normal_sums, subnormal_inputs, nan_results);
  EXPECT_GT(flushed_results, kInputs / 1000);
  EXPECT_GT(below_min_normal_sums, kInputs / 1000);
  EXPECT_GT(subnormal_inputs, kInputs / 100);
  EXPECT_GT(nan_results, kInputs / 100);
}

TEST(Bf16DotTest, EvenPairFirstIsNotTheDefinition) {
  // The order matters: taking the even element first differs from the definition on ordinary
  // inputs, so a path that swapped the order could not pass the test above.
  Rng rng(7);
  int64_t differ = 0;
  for (int i = 0; i < 100000; ++i) {
    const float acc = rng.normal();
    const uint32_t x = f32_to_bf16(rng.normal()) | (uint32_t{f32_to_bf16(rng.normal())} << 16);
    const uint32_t w = f32_to_bf16(rng.normal()) | (uint32_t{f32_to_bf16(rng.normal())} << 16);
    const float even_first =
        std::fma(bf16_to_f32(static_cast<uint16_t>(x >> 16)), bf16_to_f32(static_cast<uint16_t>(w >> 16)),
                 std::fma(bf16_to_f32(static_cast<uint16_t>(x)), bf16_to_f32(static_cast<uint16_t>(w)), acc));
    if (std::bit_cast<uint32_t>(even_first) != std::bit_cast<uint32_t>(bf16_dot2(acc, x, w))) ++differ;
  }
  std::printf("[ measured ] even-pair-first differs from the definition in %.2f %% of ordinary inputs\n",
              differ / 1000.0);
  EXPECT_GT(differ, 100);
}

}  // namespace
}  // namespace ditto
