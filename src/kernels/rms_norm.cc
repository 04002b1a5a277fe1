#include "kernels/rms_norm.h"

#include <cmath>

#include "core/cpu_features.h"
#include "kernels/reduce.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

float inv_rms(float sum_sq, int64_t n, float eps) { return 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps); }

void row_portable(const float* x, int64_t n, const float* weight, float eps, float* y) {
  const float r = inv_rms(dot_f32(x, x, n), n, eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * weight[i];
}

#if defined(__x86_64__)
DITTO_AVX512 void row_avx512(const float* x, int64_t n, const float* weight, float eps, float* y) {
  const __m512 r = _mm512_set1_ps(inv_rms(simd::dot_x16(x, x, n), n, eps));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), r), _mm512_loadu_ps(weight + i)));
  if (i < n) {
    const __mmask16 m = simd::first_lanes_x16(n - i);
    _mm512_mask_storeu_ps(
        y + i, m,
        _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r), _mm512_maskz_loadu_ps(m, weight + i)));
  }
}

DITTO_AVX2 void row_avx2(const float* x, int64_t n, const float* weight, float eps, float* y) {
  const float rs = inv_rms(simd::dot_x8x2(x, x, n), n, eps);
  const __m256 r = _mm256_set1_ps(rs);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), r), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) y[i] = (x[i] * rs) * weight[i];
}
#endif

using RowFn = void (*)(const float*, int64_t, const float*, float, float*);

RowFn row_fn() {
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return row_avx512;
    case Isa::kAvx2: return row_avx2;
    case Isa::kScalar: break;
  }
#endif
  return row_portable;
}

}  // namespace

void rms_norm_row(const float* x, int64_t n, const float* weight, float eps, float* y) {
  row_fn()(x, n, weight, eps, y);
}

void rms_norm(const float* x, int64_t rows, int64_t n, int64_t ldx, const float* weight, float eps, float* y,
              int64_t ldy) {
  const RowFn fn = row_fn();
  for (int64_t r = 0; r < rows; ++r) fn(x + r * ldx, n, weight, eps, y + r * ldy);
}

}  // namespace ditto
