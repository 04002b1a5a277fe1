#include "kernels/rope.h"

#include <cmath>

namespace ditto {

void rope_cos_sin(const int32_t* positions, int64_t num_tokens, const std::vector<double>& inv_freq,
                  float* cos_sin) {
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
  const int64_t half = head_dim / 2;
  const float* c = cos_sin_row;
  const float* s = cos_sin_row + half;
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

}  // namespace ditto
