// The canonical row reduction shared by RMSNorm, softmax and attention dot products:
// element i goes to lane i mod 16 (each lane a sequential chain in ascending i), then the 16
// lanes are added by a fixed pairwise tree (lane j += lane j+8, then +4, +2, +1). This is exactly
// one 16-wide vector accumulator (or two 8-wide ones) followed by halving adds, so SIMD paths
// reproduce it bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

namespace ditto {

inline constexpr int kReduceLanes = 16;

inline float reduce_lanes(float (&acc)[kReduceLanes]) {
  for (int w = kReduceLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

// sum_i a[i]·b[i]: lane chains of fma in ascending i, then the tree.
inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes)
    for (int j = 0; j < kReduceLanes; ++j) acc[j] = std::fma(a[i + j], b[i + j], acc[j]);
  for (int j = 0; i + j < n; ++j) acc[j] = std::fma(a[i + j], b[i + j], acc[j]);
  return reduce_lanes(acc);
}

}  // namespace ditto
