#include "kernels/activation.h"

#include "core/cpu_features.h"
#include "kernels/math.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

void row_portable(const float* g, const float* u, int64_t n, float* o) {
  for (int64_t i = 0; i < n; ++i) o[i] = silu_f32(g[i]) * u[i];
}

void gelu_row_portable(const float* g, const float* u, int64_t n, float* o) {
  for (int64_t i = 0; i < n; ++i) o[i] = gelu_tanh_f32(g[i]) * u[i];
}

#if defined(__x86_64__)
// silu(g)·u = (g / (1 + exp(−g)))·u lane by lane; the division is IEEE, as in silu_f32.
DITTO_AVX512 DITTO_INLINE __m512 silu_mul_x16(__m512 g, __m512 u) {
  const __m512 e = simd::exp_x16(_mm512_xor_ps(g, _mm512_set1_ps(-0.0f)));  // −g: a sign flip
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

DITTO_AVX512 void row_avx512(const float* g, const float* u, int64_t n, float* o) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, silu_mul_x16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = simd::first_lanes_x16(n - i);
    _mm512_mask_storeu_ps(o + i, m, silu_mul_x16(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

DITTO_AVX2 void row_avx2(const float* g, const float* u, int64_t n, float* o) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = simd::exp_x8(_mm256_xor_ps(gv, _mm256_set1_ps(-0.0f)));
    _mm256_storeu_ps(o + i,
                     _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) o[i] = silu_f32(g[i]) * u[i];
}

// gelu_tanh(g)·u lane by lane, the operations of gelu_tanh_f32 in its order (no fma).
DITTO_AVX512 DITTO_INLINE __m512 gelu_mul_x16(__m512 g, __m512 u) {
  const __m512 inner =
      _mm512_add_ps(_mm512_set1_ps(kGeluC0), _mm512_mul_ps(_mm512_set1_ps(kGeluC1), _mm512_mul_ps(g, g)));
  const __m512 e = simd::exp_x16(_mm512_xor_ps(_mm512_mul_ps(g, inner), _mm512_set1_ps(-0.0f)));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

DITTO_AVX512 void gelu_row_avx512(const float* g, const float* u, int64_t n, float* o) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, gelu_mul_x16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = simd::first_lanes_x16(n - i);
    _mm512_mask_storeu_ps(o + i, m, gelu_mul_x16(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

DITTO_AVX2 void gelu_row_avx2(const float* g, const float* u, int64_t n, float* o) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 inner =
        _mm256_add_ps(_mm256_set1_ps(kGeluC0), _mm256_mul_ps(_mm256_set1_ps(kGeluC1), _mm256_mul_ps(gv, gv)));
    const __m256 e = simd::exp_x8(_mm256_xor_ps(_mm256_mul_ps(gv, inner), _mm256_set1_ps(-0.0f)));
    _mm256_storeu_ps(o + i,
                     _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) o[i] = gelu_tanh_f32(g[i]) * u[i];
}
#endif

}  // namespace

void silu_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo) {
  auto fn = row_portable;
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: fn = row_avx512; break;
    case Isa::kAvx2: fn = row_avx2; break;
    case Isa::kScalar: break;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) fn(gate_up + r * ld, gate_up + r * ld + n, n, out + r * ldo);
}

void gelu_tanh_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo) {
  auto fn = gelu_row_portable;
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: fn = gelu_row_avx512; break;
    case Isa::kAvx2: fn = gelu_row_avx2; break;
    case Isa::kScalar: break;
  }
#endif
  for (int64_t r = 0; r < rows; ++r) fn(gate_up + r * ld, gate_up + r * ld + n, n, out + r * ldo);
}

}  // namespace ditto
