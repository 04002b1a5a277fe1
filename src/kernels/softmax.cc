#include "kernels/softmax.h"

#include <limits>

#include "core/cpu_features.h"
#include "kernels/math.h"
#include "kernels/portable_clones.h"
#include "kernels/reduce.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

// Sequential on every path: which of −0 and +0 is "the" max is decided by first occurrence,
// which a lane-parallel max would not reproduce.
float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

DITTO_PORTABLE_HOT float sum_exp_portable(const float* x, int64_t n, float max) {
  float acc[kReduceLanes] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % kReduceLanes] += exp_f32(x[i] - max);
  return reduce_lanes(acc);
}

#if defined(__x86_64__)
DITTO_AVX512 float sum_exp_avx512(const float* x, int64_t n, float max) {
  const __m512 mv = _mm512_set1_ps(max);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, simd::exp_x16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
  if (i < n) {
    const __mmask16 m = simd::first_lanes_x16(n - i);
    acc = _mm512_mask_add_ps(acc, m, acc, simd::exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv)));
  }
  return simd::reduce_lanes_x16(acc);
}

DITTO_AVX2 float sum_exp_avx2(const float* x, int64_t n, float max) {
  const __m256 mv = _mm256_set1_ps(max);
  __m256 lo = _mm256_setzero_ps();
  __m256 hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm256_add_ps(lo, simd::exp_x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
    hi = _mm256_add_ps(hi, simd::exp_x8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv)));
  }
  alignas(32) float acc[kReduceLanes];
  _mm256_store_ps(acc, lo);
  _mm256_store_ps(acc + 8, hi);
  for (int j = 0; i + j < n; ++j) acc[j] += exp_f32(x[i + j] - max);
  return reduce_lanes(acc);
}

// out[i] = exp_f32(x[i] − max) / sum, lane-wise (the same operations as the portable loop).
DITTO_AVX512 void normalize_avx512(const float* x, int64_t n, float max, float sum, float* out) {
  const __m512 mv = _mm512_set1_ps(max);
  const __m512 sv = _mm512_set1_ps(sum);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = simd::first_lanes_x16(n - i < 16 ? n - i : 16);
    _mm512_mask_storeu_ps(out + i, m,
                          _mm512_div_ps(simd::exp_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv)), sv));
  }
}

DITTO_AVX2 void normalize_avx2(const float* x, int64_t n, float max, float sum, float* out) {
  const __m256 mv = _mm256_set1_ps(max);
  const __m256 sv = _mm256_set1_ps(sum);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_div_ps(simd::exp_x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)), sv));
  for (; i < n; ++i) out[i] = exp_f32(x[i] - max) / sum;
}

DITTO_AVX512 void shift_avx512(const float* x, int64_t n, float max, float log_sum, float* out) {
  const __m512 mv = _mm512_set1_ps(max);
  const __m512 lv = _mm512_set1_ps(log_sum);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv), lv));
  for (; i < n; ++i) out[i] = (x[i] - max) - log_sum;
}
#endif

float sum_exp(const float* x, int64_t n, float max) {
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return sum_exp_avx512(x, n, max);
    case Isa::kAvx2: return sum_exp_avx2(x, n, max);
    case Isa::kScalar: break;
  }
#endif
  return sum_exp_portable(x, n, max);
}

}  // namespace

void log_softmax_row(const float* x, int64_t n, float* out) {
  const float max = row_max(x, n);
  const float log_sum = log_f32(sum_exp(x, n, max));
#if defined(__x86_64__)
  if (active_isa() == Isa::kAvx512) return shift_avx512(x, n, max, log_sum, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - max) - log_sum;
}

void softmax_row(const float* x, int64_t n, float* out) {
  const float max = row_max(x, n);
  const float sum = sum_exp(x, n, max);
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512: return normalize_avx512(x, n, max, sum, out);
    case Isa::kAvx2: return normalize_avx2(x, n, max, sum, out);
    case Isa::kScalar: break;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = exp_f32(x[i] - max) / sum;
}

int64_t argmax_row(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  return best;
}

}  // namespace ditto
