// The canonical bf16 pair step of the bf16-weight GEMM (kernels/gemm.h), on every path.
//
// One step takes an accumulator and two bf16 pairs, x = (x0, x1) and w = (w0, w1), packed in a
// 32-bit word with element 0 in the low half (as VDPBF16PS reads them), and computes
//
//   acc = F(fma(F(x1), F(w1), F(acc)))      the odd element first,
//   acc = F(fma(F(x0), F(w0), acc))         then the even one,
//
// where F flushes a subnormal to a zero of the same sign (a denormal input is read as zero, a
// result whose magnitude after rounding is below 2^-126 becomes zero), every fma rounds to nearest
// even, and bf16 → float32 is exact. This is what Intel's VDPBF16PS does per float32 lane
// (Intel SDM, "VDPBF16PS": DAZ, FTZ and round-to-nearest-even regardless of MXCSR); the
// evaluation order (odd pair first) and the flushing were found by comparing the instruction
// with candidate definitions over 10^8 random and adversarial inputs, and bf16_dot_test repeats
// that comparison for every path. bf16 × bf16 products are exact in float32 precision, so each
// fma's only rounding is that of the sum. The NaN a step returns may carry either operand's
// payload; the GEMM stores every NaN as the canonical quiet NaN 0x7FC00000, so payloads never
// reach an output.
//
// Paths: bf16_dot2 (portable, the definition: flushes in software); bf16_dot2_native_x16
// (VDPBF16PS); bf16_dot2_emulated_x16 / _x8 (AVX-512 / AVX2 FMAs, which flush exactly as F does
// while MXCSR has DAZ and FTZ set — run them inside a ScopedFlushDenormals).
#pragma once

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/simd.h"

namespace ditto {

// F above: a subnormal becomes a zero of the same sign; everything else (NaN included) is kept.
inline float flush_subnormal(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

// One canonical step (the definition). x, w: bf16 pairs, element 0 in bits 0–15.
inline float bf16_dot2(float acc, uint32_t x, uint32_t w) {
  const float x1 = flush_subnormal(bf16_to_f32(static_cast<uint16_t>(x >> 16)));
  const float w1 = flush_subnormal(bf16_to_f32(static_cast<uint16_t>(w >> 16)));
  const float x0 = flush_subnormal(bf16_to_f32(static_cast<uint16_t>(x)));
  const float w0 = flush_subnormal(bf16_to_f32(static_cast<uint16_t>(w)));
  acc = flush_subnormal(std::fma(x1, w1, flush_subnormal(acc)));
  return flush_subnormal(std::fma(x0, w0, acc));
}

// The float32 quiet NaN every GEMM output NaN is stored as.
inline constexpr uint32_t kCanonicalNan = 0x7fc00000u;

inline float canonical_nan_if_nan(float v) { return std::isnan(v) ? std::bit_cast<float>(kCanonicalNan) : v; }

}  // namespace ditto

#if defined(__x86_64__)
#include <immintrin.h>

#define DITTO_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c")))

namespace ditto {

// Sets MXCSR to round-to-nearest-even, all exceptions masked, DAZ and FTZ for its lifetime (then
// restores the caller's), so that float32 FMAs flush exactly as F does. The compiler barriers keep
// the loads and stores of the work inside from moving across the switch.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(kRoundNearestMaskedDazFtz);
    asm volatile("" ::: "memory");
  }
  ~ScopedFlushDenormals() {
    asm volatile("" ::: "memory");
    _mm_setcsr(saved_);
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  static constexpr unsigned kRoundNearestMaskedDazFtz = 0x1f80u | 0x8000u /*FTZ*/ | 0x0040u /*DAZ*/;
  unsigned saved_;
};

namespace simd {

// 16 lanes of bf16_dot2 by VDPBF16PS. x, w: 16 bf16 pairs.
DITTO_AVX512_BF16 DITTO_INLINE __m512 bf16_dot2_native_x16(__m512 acc, __m512i x, __m512i w) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(x), reinterpret_cast<__m512bh>(w));
}

// The odd (bits 16–31) and even (bits 0–15) bf16 of 16 pairs as float32 (exact).
DITTO_AVX512 DITTO_INLINE __m512 bf16_odd_x16(__m512i pairs) {
  return _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}
DITTO_AVX512 DITTO_INLINE __m512 bf16_even_x16(__m512i pairs) {
  // maskz with every lane: GCC 12's unmasked _mm512_slli_epi32 trips -Wuninitialized at -O2.
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(static_cast<__mmask16>(0xffff), pairs, 16));
}

// 16 lanes of bf16_dot2 by two FMAs; exact only under ScopedFlushDenormals. x1, x0 and w1, w0:
// the odd and even elements of the x and w pairs as float32 (bf16_odd_x16 / bf16_even_x16 of
// the pairs, or rounded values widened once and broadcast).
DITTO_AVX512 DITTO_INLINE __m512 bf16_dot2_emulated_x16(__m512 acc, __m512 x1, __m512 x0, __m512 w1, __m512 w0) {
  acc = _mm512_fmadd_ps(x1, w1, acc);
  return _mm512_fmadd_ps(x0, w0, acc);
}

// Every NaN lane as kCanonicalNan.
DITTO_AVX512 DITTO_INLINE __m512 canonical_nan_x16(__m512 v) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v,
                              _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kCanonicalNan))));
}

DITTO_AVX2 DITTO_INLINE __m256 bf16_odd_x8(__m256i pairs) {
  return _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}
DITTO_AVX2 DITTO_INLINE __m256 bf16_even_x8(__m256i pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)); }

// 8 lanes of bf16_dot2 by two FMAs; exact only under ScopedFlushDenormals. Arguments as above.
DITTO_AVX2 DITTO_INLINE __m256 bf16_dot2_emulated_x8(__m256 acc, __m256 x1, __m256 x0, __m256 w1, __m256 w0) {
  acc = _mm256_fmadd_ps(x1, w1, acc);
  return _mm256_fmadd_ps(x0, w0, acc);
}

DITTO_AVX2 DITTO_INLINE __m256 canonical_nan_x8(__m256 v) {
  return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kCanonicalNan))),
                          _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

}  // namespace simd
}  // namespace ditto
#endif  // __x86_64__
