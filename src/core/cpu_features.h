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

// The CPU's model name as the OS reports it (/proc/cpuinfo's "model name"), or "unknown CPU".
std::string cpu_model_name();

// Whether this CPU (and OS) has AVX512-VNNI (vpdpbusd), which the avx512 path's quantized GEMM uses
// for its u8×s8 block dot products when allowed.
bool cpu_has_avx512_vnni();

// Whether the avx512 path's quantized GEMM uses VNNI now: cpu_has_avx512_vnni(), unless switched off
// by $DITTO_AVX512_VNNI=0 (read at first call) or set_avx512_vnni_allowed(false). With and without
// VNNI the integer sums are exact, so the bits are the same; tests run both variants on one CPU.
bool avx512_vnni_enabled();
void set_avx512_vnni_allowed(bool allowed);

// Whether this CPU (and OS) has AVX512-BF16, whose VDPBF16PS the avx512 path's bf16-weight GEMM
// uses when allowed.
bool cpu_has_avx512_bf16();

// Whether the avx512 path's bf16-weight GEMM uses VDPBF16PS now. Without it the path emulates the
// instruction with float32 FMAs (kernels/bf16_dot.h): the same bits, so the choice is by speed.
// $DITTO_AVX512_BF16 (read at first call): "0" never, "1" always (on a CPU with AVX512-BF16),
// unset: where a one-off timing (about 2 ms) finds VDPBF16PS doing at least 0.8 of the FMAs'
// multiply-adds per second (the emulation also spends issue slots unpacking) — some cores issue it
// at a quarter of the FMA instruction rate. set_avx512_bf16_allowed(b) sets never / always.
bool avx512_bf16_enabled();
void set_avx512_bf16_allowed(bool allowed);

// Restores the previous permission of an optional avx512 instruction on scope exit, e.g.
// ScopedAvx512Vnni v(false) runs the scope without VNNI.
template <bool (*kEnabled)(), void (*kSetAllowed)(bool)>
class ScopedPermission {
 public:
  explicit ScopedPermission(bool allowed) : previous_(kEnabled()) { kSetAllowed(allowed); }
  ~ScopedPermission() { kSetAllowed(previous_); }
  ScopedPermission(const ScopedPermission&) = delete;
  ScopedPermission& operator=(const ScopedPermission&) = delete;

 private:
  bool previous_;
};
using ScopedAvx512Vnni = ScopedPermission<avx512_vnni_enabled, set_avx512_vnni_allowed>;
using ScopedAvx512Bf16 = ScopedPermission<avx512_bf16_enabled, set_avx512_bf16_allowed>;

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
