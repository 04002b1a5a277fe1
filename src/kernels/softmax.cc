#include "kernels/softmax.h"

#include <limits>

#include "kernels/math.h"
#include "kernels/reduce.h"

namespace ditto {
namespace {

float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float sum_exp(const float* x, int64_t n, float max) {
  float acc[kReduceLanes] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % kReduceLanes] += exp_f32(x[i] - max);
  return reduce_lanes(acc);
}

}  // namespace

void log_softmax_row(const float* x, int64_t n, float* out) {
  const float max = row_max(x, n);
  const float log_sum = log_f32(sum_exp(x, n, max));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - max) - log_sum;
}

void softmax_row(const float* x, int64_t n, float* out) {
  const float max = row_max(x, n);
  const float sum = sum_exp(x, n, max);
  for (int64_t i = 0; i < n; ++i) out[i] = exp_f32(x[i] - max) / sum;
}

int64_t argmax_row(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  return best;
}

}  // namespace ditto
