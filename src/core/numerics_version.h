// The version of ditto's numerics: which bits its kernels, sampler and formulas give for a given
// model and request (docs/NUMERICS.md). Two builds with the same version give the same bits; bump
// it when any kernel's, the sampler's or a formula's bits change, and only then (a speed-up that
// keeps every bit keeps the version). It is one part of the server's system_fingerprint
// (src/engine/system_fingerprint.h), so clients see the change.
#pragma once

#include <cstdint>

namespace ditto {

inline constexpr int32_t kNumericsVersion = 1;

}  // namespace ditto
