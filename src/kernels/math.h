// ditto's own float32 exp and log: one algorithm, written with explicit std::fma, that every ISA
// path reproduces bit for bit (libm's results differ between versions and vector libraries).
//
// exp: n = round(x·log2 e) (ties to even, via the 1.5·2^23 trick), r = x − n·ln2 in two fma steps
// (Cody–Waite split of ln2), e^r by its degree-7 Taylor polynomial (Horner, fma), then scaled by
// 2^n as two exact power-of-two multiplies so subnormal results round once. Max error ≤ 2 ulp.
// log: x = m·2^e with m in [√½, √2), s = (m−1)/(m+1), log m = 2·atanh(s) by its odd Taylor series
// to s^11 (|s| ≤ 0.172, truncation < 1e-10), plus e·ln2 (split). Max error ≤ 2 ulp.
// Both are checked against double-precision libm in math_test.cc.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ditto {

inline float pow2_i(int n) {  // 2^n for n in [-126, 127], exact
  return std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269502f;
  constexpr float kLn2Hi = 0.693145752f;  // ln2 with its low 12 bits zero: n·kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860677e-06f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer, ties to even
  if (std::isnan(x)) return x;
  if (x > 88.7228394f) return std::numeric_limits<float>::infinity();
  if (x < -103.972084f) return 0.0f;
  const float n = (x * kLog2e + kRound) - kRound;
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = 1.98412701e-04f;            // 1/7!
  p = std::fma(p, r, 1.38888892e-03f);  // 1/6!
  p = std::fma(p, r, 8.33333377e-03f);  // 1/5!
  p = std::fma(p, r, 4.16666679e-02f);  // 1/4!
  p = std::fma(p, r, 1.66666672e-01f);  // 1/3!
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int ni = static_cast<int>(n);  // in [-150, 128]
  const int n1 = ni / 2;
  return (p * pow2_i(n1)) * pow2_i(ni - n1);
}

inline float log_f32(float x) {
  constexpr float kLn2Hi = 0.693145752f;
  constexpr float kLn2Lo = 1.42860677e-06f;
  if (std::isnan(x) || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (x == std::numeric_limits<float>::infinity()) return x;
  int e_adjust = 0;
  if (x < 1.17549435e-38f) {  // subnormal: scale into the normal range, exactly
    x *= 8388608.0f;          // 2^23
    e_adjust = -23;
  }
  uint32_t bits = std::bit_cast<uint32_t>(x);
  int e = static_cast<int>(bits >> 23) - 127 + e_adjust;
  bits = (bits & 0x007fffffu) | 0x3f800000u;  // m in [1, 2)
  float m = std::bit_cast<float>(bits);
  if (m > 1.41421354f) {
    m *= 0.5f;
    e += 1;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float z = s * s;
  float p = 0.181818187f;            // 2/11
  p = std::fma(p, z, 0.222222224f);  // 2/9
  p = std::fma(p, z, 0.285714298f);  // 2/7
  p = std::fma(p, z, 0.400000006f);  // 2/5
  p = std::fma(p, z, 0.666666687f);  // 2/3
  const float log_m = std::fma(s * z, p, 2.0f * s);
  const float ef = static_cast<float>(e);
  return std::fma(ef, kLn2Hi, std::fma(ef, kLn2Lo, log_m));
}

// SiLU(x) = x·σ(x) = x / (1 + e^(−x)), with ditto's exp and an IEEE division.
inline float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }

// GELU, tanh approximation (Hendrycks & Gimpel 2016; PyTorch gelu(approximate="tanh"), Hugging Face
// "gelu_pytorch_tanh"): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), computed as the equal
// x / (1 + exp(−u)), u = x·(kGeluC0 + kGeluC1·x²) (0.5·(1 + tanh z) = 1 / (1 + exp(−2z))), every
// operation a float32 product, sum or IEEE division in this order, no fma.
inline constexpr float kGeluC0 = 1.59576917f;    // 2·√(2/π), rounded to float32
inline constexpr float kGeluC1 = 0.0713548139f;  // 2·√(2/π)·0.044715, rounded to float32
inline float gelu_tanh_f32(float x) {
  const float u = x * (kGeluC0 + kGeluC1 * (x * x));
  return x / (1.0f + exp_f32(-u));
}

}  // namespace ditto
