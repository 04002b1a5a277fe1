#include "kernels/convert.h"

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

void round_to_bf16_portable(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

#if defined(__x86_64__)
// f32_to_bf16 lane-wise: round to nearest even on the bit pattern; NaN → quiet NaN.
DITTO_AVX512 void round_to_bf16_avx512(const float* x, int64_t n, uint16_t* out) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = simd::first_lanes_x16(n - i < 16 ? n - i : 16);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  }
}

DITTO_AVX2 void round_to_bf16_avx2(const float* x, int64_t n, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  round_to_bf16_portable(x + i, n - i, out + i);
}
#endif

}  // namespace

void round_to_bf16(const float* x, int64_t n, uint16_t* out) {
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return round_to_bf16_avx512(x, n, out);
    case Isa::kAvx2: return round_to_bf16_avx2(x, n, out);
    case Isa::kScalar: break;
  }
#endif
  round_to_bf16_portable(x, n, out);
}

}  // namespace ditto
