// Helpers shared by the kernel tests: a fully specified seeded RNG (so a failure reproduces with any
// standard library), an exact bit comparison that names the first differing element, the canonical
// 16-lane reduction written independently from kernels/reduce.h, decoders of the storage dtypes
// written independently from core/dtype.cc, and the rounding-error constant γ_n.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "core/dtype.h"
#include "kernels/packed_matrix.h"

namespace ditto::test {

// Unit roundoff of float32 with round-to-nearest.
inline constexpr double kU = 0x1p-24;

// γ_n = n·u / (1 − n·u) (Higham, "Accuracy and Stability of Numerical Algorithms", Lemma 3.1):
// bounds |Π(1 + δ_i)^±1 − 1| for n roundings |δ_i| ≤ u, i.e. the relative error a term of a sum
// picks up when it passes through n float32 roundings.
inline double gamma_n(int64_t n) {
  const double nu = static_cast<double>(n) * kU;
  return nu / (1.0 - nu);
}

// splitmix64 (Steele, Lea & Flood 2014): a tiny, fully specified generator, unlike the
// implementation-defined std distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  float uniform(float lo, float hi) { return static_cast<float>(lo + (hi - lo) * uniform()); }
  int64_t uniform_int(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  float normal() {  // Box–Muller
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  std::vector<float> normal_vector(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = normal() * scale;
    return v;
  }

 private:
  uint64_t state_;
};

inline uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// Exact comparison of bit patterns (so -0 ≠ +0 and NaN payloads count). On failure names how many
// elements differ and the first one, with both values and bit patterns.
inline ::testing::AssertionResult BitsEqual(const float* expected, const float* actual, int64_t n) {
  int64_t first = -1;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (bits_of(expected[i]) != bits_of(actual[i])) {
      if (first < 0) first = i;
      ++count;
    }
  }
  if (count == 0) return ::testing::AssertionSuccess();
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%lld of %lld elements differ; first at [%lld]: expected %.9g (0x%08x), actual %.9g "
                "(0x%08x)",
                static_cast<long long>(count), static_cast<long long>(n), static_cast<long long>(first),
                expected[first], bits_of(expected[first]), actual[first], bits_of(actual[first]));
  return ::testing::AssertionFailure() << buf;
}

inline ::testing::AssertionResult BitsEqual(const std::vector<float>& expected, const std::vector<float>& actual) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure() << "sizes differ: " << expected.size() << " vs " << actual.size();
  return BitsEqual(expected.data(), actual.data(), static_cast<int64_t>(expected.size()));
}

// The canonical row reduction exactly as the kernel headers state it: term i goes into lane
// i mod 16, each lane a sequential chain from +0.0 in ascending i (lane = fold(lane, i)), then
// lane j += lane j+8, +4, +2, +1.
template <typename Fold>
float lane_reduce(int64_t n, Fold fold) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] = fold(lane[i % 16], i);
  for (int w = 8; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = lane[j] + lane[j + w];
  return lane[0];
}

// Σ a[i]·b[i] in the canonical order with one fma per term.
inline float contract_dot(const float* a, const float* b, int64_t n) {
  return lane_reduce(n, [&](float acc, int64_t i) { return std::fma(a[i], b[i], acc); });
}

// Storage dtypes decoded from their bit fields in double, independently of core/dtype.cc.
inline double decode_bf16(uint16_t h) {  // bf16 is by definition the top half of a float32
  return static_cast<double>(std::bit_cast<float>(uint32_t{h} << 16));
}
inline double decode_f16(uint16_t h) {  // IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 bits
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(m, -24);
  } else if (e == 31) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1024 + m, e - 25);
  }
  return (h & 0x8000) ? -v : v;
}

// A weight matrix [n, k] as a checkpoint stores it (row-major bytes in `dtype`), plus its values
// decoded in double. Values are normal(0, scale); for f16 about 1 in 16 is scaled by 2^-20 so that
// f16 subnormals occur too.
struct StoredMatrix {
  DType dtype = DType::kF32;
  int64_t n = 0;
  int64_t k = 0;
  std::vector<uint8_t> bytes;  // [n, k] dtype
  std::vector<double> values;  // [n, k]

  MatrixSource source() const { return {bytes.data(), dtype, n, k}; }
  double at(int64_t row, int64_t col) const { return values[static_cast<size_t>(row * k + col)]; }
};

inline StoredMatrix random_matrix(Rng& rng, DType dtype, int64_t n, int64_t k, float scale = 1.0f) {
  StoredMatrix m;
  m.dtype = dtype;
  m.n = n;
  m.k = k;
  const size_t count = static_cast<size_t>(n * k);
  m.bytes.resize(count * dtype_size(dtype));
  m.values.resize(count);
  for (size_t i = 0; i < count; ++i) {
    float f = rng.normal() * scale;
    if (dtype == DType::kF16 && rng.next() % 16 == 0) f *= 0x1p-20f;
    if (dtype == DType::kF32) {
      std::memcpy(m.bytes.data() + 4 * i, &f, 4);
      m.values[i] = f;
    } else {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(f) : f32_to_f16(f);
      std::memcpy(m.bytes.data() + 2 * i, &h, 2);
      m.values[i] = dtype == DType::kBF16 ? decode_bf16(h) : decode_f16(h);
    }
  }
  return m;
}

inline const char* dtype_label(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

inline constexpr DType kAllDTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

}  // namespace ditto::test
