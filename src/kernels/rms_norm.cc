#include "kernels/rms_norm.h"

#include <cmath>

#include "kernels/reduce.h"

namespace ditto {

void rms_norm_row(const float* x, int64_t n, const float* weight, float eps, float* y) {
  const float sum_sq = dot_f32(x, x, n);
  const float r = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * r) * weight[i];
}

void rms_norm(const float* x, int64_t rows, int64_t n, int64_t ldx, const float* weight, float eps,
              float* y, int64_t ldy) {
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(x + r * ldx, n, weight, eps, y + r * ldy);
}

}  // namespace ditto
