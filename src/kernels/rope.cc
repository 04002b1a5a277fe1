#include "kernels/rope.h"

#include <cmath>

#include "core/cpu_features.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

void apply_portable(float* x, int64_t num_heads, int64_t head_dim, const float* c, const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
  }
}

#if defined(__x86_64__)
DITTO_AVX512 void apply_avx512(float* x, int64_t num_heads, int64_t head_dim, const float* c, const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; i += 16) {
      const __mmask16 m = simd::first_lanes_x16(half - i < 16 ? half - i : 16);
      const __m512 a = _mm512_maskz_loadu_ps(m, v + i);
      const __m512 b = _mm512_maskz_loadu_ps(m, v + half + i);
      const __m512 cv = _mm512_maskz_loadu_ps(m, c + i);
      const __m512 sv = _mm512_maskz_loadu_ps(m, s + i);
      _mm512_mask_storeu_ps(v + i, m, _mm512_sub_ps(_mm512_mul_ps(a, cv), _mm512_mul_ps(b, sv)));
      _mm512_mask_storeu_ps(v + half + i, m, _mm512_add_ps(_mm512_mul_ps(b, cv), _mm512_mul_ps(a, sv)));
    }
  }
}

DITTO_AVX2 void apply_avx2(float* x, int64_t num_heads, int64_t head_dim, const float* c, const float* s) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(v + i);
      const __m256 b = _mm256_loadu_ps(v + half + i);
      const __m256 cv = _mm256_loadu_ps(c + i);
      const __m256 sv = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, cv), _mm256_mul_ps(b, sv)));
      _mm256_storeu_ps(v + half + i, _mm256_add_ps(_mm256_mul_ps(b, cv), _mm256_mul_ps(a, sv)));
    }
    for (; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
  }
}
#endif

}  // namespace

void rope_cos_sin(const int32_t* positions, int64_t num_tokens, const std::vector<double>& inv_freq, float* cos_sin) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* row = cos_sin + t * 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      row[i] = static_cast<float>(std::cos(angle));
      row[half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_apply(float* x, int64_t num_heads, int64_t head_dim, const float* cos_sin_row) {
  const float* c = cos_sin_row;
  const float* s = cos_sin_row + head_dim / 2;
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return apply_avx512(x, num_heads, head_dim, c, s);
    case Isa::kAvx2: return apply_avx2(x, num_heads, head_dim, c, s);
    case Isa::kScalar: break;
  }
#endif
  apply_portable(x, num_heads, head_dim, c, s);
}

}  // namespace ditto
