// Building blocks of the AVX2 and AVX-512 kernel paths (x86-64 only).
//
// Each ISA path is compiled with a function-level target attribute (DITTO_AVX2 / DITTO_AVX512), so
// one binary runs on any x86-64 and the paths are chosen at run time by active_isa()
// (core/cpu_features.h). Every helper here computes exactly what its portable counterpart computes,
// lane by lane: the same float32 operations in the same order (no operation is fused or
// reassociated: intrinsics are explicit, and -ffp-contract=off keeps the compiler from contracting).
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

// GCC 12 reports the deliberately undefined operands inside its own intrinsics (e.g.
// _mm512_cvtph_ps, and _mm512_max_ps's `__Y = __Y` once inlined into a caller) as "(may be) used
// uninitialized"; they are not.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define DITTO_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DITTO_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
#define DITTO_INLINE inline __attribute__((always_inline))

namespace ditto::simd {

// ---- AVX-512: 16 float32 lanes -------------------------------------------------------------

// 16 bf16 → f32 (exact: the bf16 bits become the high half of the f32).
DITTO_AVX512 DITTO_INLINE __m512 load_bf16_x16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
// 16 f16 → f32 (exact, subnormals included; VCVTPH2PS ignores MXCSR.DAZ).
DITTO_AVX512 DITTO_INLINE __m512 load_f16_x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The canonical 16-lane tree of kernels/reduce.h: lane j += lane j+8, then +4, +2, +1.
DITTO_AVX512 DITTO_INLINE float reduce_lanes_x16(__m512 v) {
  // Both halves by extractf32x8 (AVX512DQ): GCC 12's _mm512_extractf64x4_pd, which its
  // _mm512_castps512_ps256 also uses, trips -Wuninitialized on its own _mm256_undefined_pd.
  __m256 a = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));         // j += j+2
  b = _mm_add_ss(b, _mm_shuffle_ps(b, b, 0x55));  // j += j+1
  return _mm_cvtss_f32(b);
}

// 2^n for integer lanes n in [-126, 127] (exact), as kernels/math.h pow2_i.
DITTO_AVX512 DITTO_INLINE __m512 pow2_i_x16(__m512i n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

// exp_f32 of kernels/math.h on 16 lanes, bit for bit.
DITTO_AVX512 DITTO_INLINE __m512 exp_x16(__m512 x) {
  const __m512 n =
      _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269502f)), _mm512_set1_ps(12582912.0f)),
                    _mm512_set1_ps(12582912.0f));
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145752f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.42860677e-06f), r);
  __m512 p = _mm512_set1_ps(1.98412701e-04f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.38888892e-03f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.33333377e-03f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.16666679e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.66666672e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvttps_epi32(n);
  // ni / 2 rounded toward zero, as C++ integer division.
  const __m512i n1 = _mm512_srai_epi32(_mm512_add_epi32(ni, _mm512_srli_epi32(ni, 31)), 1);
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, pow2_i_x16(n1)), pow2_i_x16(_mm512_sub_epi32(ni, n1)));
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.972084f), _CMP_LT_OQ), y, _mm512_setzero_ps());
  y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7228394f), _CMP_GT_OQ), y,
                           _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

// Mask of the first `n` lanes (n in [0, 16]).
DITTO_AVX512 DITTO_INLINE __mmask16 first_lanes_x16(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// dot_f32 of kernels/reduce.h (lane i mod 16 chains, then the tree). B is float32 or bf16.
template <typename B>
DITTO_AVX512 DITTO_INLINE __m512 load_x16(const B* p) {
  if constexpr (sizeof(B) == 2)
    return load_bf16_x16(reinterpret_cast<const uint16_t*>(p));
  else
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}
template <typename B>
DITTO_AVX512 DITTO_INLINE __m512 maskz_load_x16(__mmask16 m, const B* p) {
  if constexpr (sizeof(B) == 2) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else {
    return _mm512_maskz_loadu_ps(m, p);
  }
}
template <typename B>
DITTO_AVX512 DITTO_INLINE float dot_x16(const float* a, const B* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load_x16(b + i), acc);
  if (i < n) {
    const __mmask16 m = first_lanes_x16(n - i);
    // Lanes past n keep their value (an fma with 0·0 would turn a −0 lane into +0).
    acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), maskz_load_x16(m, b + i), acc, m);
  }
  return reduce_lanes_x16(acc);
}

// ---- AVX2: 8 float32 lanes (a 16-lane row is two registers: lanes 0–7 and 8–15) -----------

DITTO_AVX2 DITTO_INLINE __m256 load_bf16_x8(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
DITTO_AVX2 DITTO_INLINE __m256 load_f16_x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The 16-lane tree on (lanes 0–7, lanes 8–15).
DITTO_AVX2 DITTO_INLINE float reduce_lanes_x8x2(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);  // j += j+8
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_shuffle_ps(b, b, 0x55));
  return _mm_cvtss_f32(b);
}

DITTO_AVX2 DITTO_INLINE __m256 pow2_i_x8(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

DITTO_AVX2 DITTO_INLINE __m256 exp_x8(__m256 x) {
  const __m256 n =
      _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269502f)), _mm256_set1_ps(12582912.0f)),
                    _mm256_set1_ps(12582912.0f));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693145752f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-1.42860677e-06f), r);
  __m256 p = _mm256_set1_ps(1.98412701e-04f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.38888892e-03f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.33333377e-03f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.16666679e-02f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.66666672e-01f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvttps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1);
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, pow2_i_x8(n1)), pow2_i_x8(_mm256_sub_epi32(ni, n1)));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-103.972084f), _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(88.7228394f), _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// All-ones in the first `n` lanes (n in [0, 8]), for maskload/blendv.
DITTO_AVX2 DITTO_INLINE __m256i first_lanes_x8(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

template <typename B>
DITTO_AVX2 DITTO_INLINE __m256 load_x8(const B* p) {
  if constexpr (sizeof(B) == 2)
    return load_bf16_x8(reinterpret_cast<const uint16_t*>(p));
  else
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
// Lanes [0, n) of p (n in [0, 8]), zeros elsewhere; never reads past p + n.
template <typename B>
DITTO_AVX2 DITTO_INLINE __m256 maskz_load_x8(int64_t n, const B* p) {
  if (n <= 0) return _mm256_setzero_ps();
  if constexpr (sizeof(B) == 2) {
    alignas(16) uint16_t buf[8] = {};
    for (int64_t i = 0; i < n && i < 8; ++i) buf[i] = reinterpret_cast<const uint16_t*>(p)[i];
    return load_bf16_x8(buf);
  } else {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(p), first_lanes_x8(n));
  }
}
template <typename B>
DITTO_AVX2 DITTO_INLINE float dot_x8x2(const float* a, const B* b, int64_t n) {
  __m256 lo = _mm256_setzero_ps();
  __m256 hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_x8(b + i), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_x8(b + i + 8), hi);
  }
  if (i < n) {
    const int64_t r = n - i;
    const __m256 m_lo = _mm256_castsi256_ps(first_lanes_x8(r));
    const __m256 m_hi = _mm256_castsi256_ps(first_lanes_x8(r - 8));
    lo = _mm256_blendv_ps(lo, _mm256_fmadd_ps(maskz_load_x8(r, a + i), maskz_load_x8(r, b + i), lo), m_lo);
    hi = _mm256_blendv_ps(hi, _mm256_fmadd_ps(maskz_load_x8(r - 8, a + i + 8), maskz_load_x8(r - 8, b + i + 8), hi),
                          m_hi);
  }
  return reduce_lanes_x8x2(lo, hi);
}

}  // namespace ditto::simd
#endif  // __x86_64__
