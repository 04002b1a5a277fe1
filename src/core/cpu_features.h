// Which instruction-set path the kernels run: detected from CPUID at first use, or forced with
// $DITTO_ISA=scalar|avx2|avx512. Every path computes the same bits (docs/NUMERICS.md), so the
// choice changes speed only.
//
// Paths:
//   kScalar  portable C++ (the definition of the numerics; the only path off x86-64)
//   kAvx2    AVX2 + FMA + F16C (x86-64-v3)
//   kAvx512  AVX-512 F/BW/DQ/VL + AVX2 + FMA + F16C (x86-64-v4)
#pragma once

#include <string>
#include <string_view>

namespace ditto {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

// "scalar", "avx2", "avx512".
std::string_view isa_name(Isa isa);

// True if this CPU and OS can run `isa` (CPUID feature bits and XSAVE-enabled register state).
bool cpu_supports(Isa isa);

// The widest path this CPU supports.
Isa detect_isa();

// The path kernels use. On first call reads $DITTO_ISA (unset or empty: detect_isa()).
// Throws Error(kInvalidArgument) if $DITTO_ISA names no path, or a path this CPU cannot run
// (naming the missing feature) — a clear error instead of SIGILL.
Isa active_isa();

// Forces the path for this process (tests compare every path in one run).
// Throws Error(kInvalidArgument) if the CPU cannot run it.
void set_active_isa(Isa isa);

// Parses "scalar" | "avx2" | "avx512"; Error(kInvalidArgument) naming `what` otherwise.
Isa parse_isa(std::string_view text, std::string_view what);

// One line for --version and logs, e.g. "isa avx512 (cpu supports avx512; avx512_bf16 present)".
std::string isa_description();

// Restores the previous path on scope exit.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) : previous_(active_isa()) { set_active_isa(isa); }
  ~ScopedIsa() { set_active_isa(previous_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

namespace detail {
// Whether the CPU has a feature named as GCC's __builtin_cpu_supports names it ("avx512f", ...).
using CpuHasFn = bool (*)(std::string_view feature);
// The first feature `isa` needs that `has` denies, or nullptr. (Exposed to test the decision
// with a fake CPU.)
const char* missing_feature(Isa isa, CpuHasFn has);
// The error message for requesting `isa` through `origin` (e.g. "DITTO_ISA") on the CPU that
// `has` describes, naming the missing feature and the usable paths; "" if the CPU can run it.
std::string unsupported_message(Isa isa, std::string_view origin, CpuHasFn has);
}  // namespace detail

}  // namespace ditto
