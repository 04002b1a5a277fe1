// Philox4x32 counter-based random number generator (Salmon, Moraes, Dror, Shaw: "Parallel Random
// Numbers: As Easy as 1, 2, 3", SC'11), as in the Random123 library and curand.
//
// A counter-based RNG is a pure function (counter, key) -> 128 random bits: there is no state to
// advance, so the value for (seed, i, t) never depends on which thread asks, in which order, or
// what else was drawn before. ditto keys it by a request's seed (sampling) or by a tensor name
// (test weights). Checked against the Random123 known-answer vectors in philox_test.cc.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>

namespace ditto {

namespace philox_detail {
inline constexpr uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

constexpr std::array<uint32_t, 4> round(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  const uint64_t p0 = uint64_t{kMultiplier0} * c[0];
  const uint64_t p1 = uint64_t{kMultiplier1} * c[2];
  const auto hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const auto hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}
}  // namespace philox_detail

// Philox4x32 with `Rounds` rounds (10 is the standard, crush-resistant choice).
template <int Rounds>
constexpr std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int r = 0; r < Rounds; ++r) {
    if (r > 0) {  // the key schedule bumps the key before every round but the first
      key[0] += philox_detail::kWeyl0;
      key[1] += philox_detail::kWeyl1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

constexpr std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  return philox4x32<10>(counter, key);
}

// A 32-bit random word as a double uniform in (0, 1] (never 0, so log() is safe).
constexpr double philox_uniform_open0(uint32_t x) { return (double(x) + 1.0) * 0x1p-32; }
// A 32-bit random word as a double uniform in [0, 1).
constexpr double philox_uniform(uint32_t x) { return double(x) * 0x1p-32; }

}  // namespace ditto
