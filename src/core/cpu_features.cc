#include "core/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"

namespace ditto {
namespace {

// -1: not decided yet.
std::atomic<int> g_active{-1};
std::once_flag g_env_once;

#if defined(__x86_64__)
// libgcc's __builtin_cpu_supports checks the CPUID bits and, for AVX/AVX-512, that the OS saves
// the wider registers (XGETBV), so a "true" here means the instructions will not fault.
const char* missing_feature(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar: return nullptr;
    case Isa::kAvx2:
      if (!__builtin_cpu_supports("avx2")) return "avx2";
      if (!__builtin_cpu_supports("fma")) return "fma";
      if (!__builtin_cpu_supports("f16c")) return "f16c";
      return nullptr;
    case Isa::kAvx512:
      if (!__builtin_cpu_supports("avx2")) return "avx2";
      if (!__builtin_cpu_supports("fma")) return "fma";
      if (!__builtin_cpu_supports("f16c")) return "f16c";
      if (!__builtin_cpu_supports("avx512f")) return "avx512f";
      if (!__builtin_cpu_supports("avx512bw")) return "avx512bw";
      if (!__builtin_cpu_supports("avx512dq")) return "avx512dq";
      if (!__builtin_cpu_supports("avx512vl")) return "avx512vl";
      return nullptr;
  }
  return "unknown";
}
#else
const char* missing_feature(Isa isa) { return isa == Isa::kScalar ? nullptr : "an x86-64 CPU"; }
#endif

void check_supported(Isa isa, std::string_view origin) {
  if (const char* missing = missing_feature(isa))
    throw_invalid_argument(std::string(origin) + "=" + std::string(isa_name(isa)) +
                           ": this CPU cannot run that path (it lacks " + missing +
                           "); use one of: " + [] {
                             std::string s = "scalar";
                             if (cpu_supports(Isa::kAvx2)) s += ", avx2";
                             if (cpu_supports(Isa::kAvx512)) s += ", avx512";
                             return s;
                           }());
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool cpu_supports(Isa isa) { return missing_feature(isa) == nullptr; }

Isa detect_isa() {
  if (cpu_supports(Isa::kAvx512)) return Isa::kAvx512;
  if (cpu_supports(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa parse_isa(std::string_view text, std::string_view what) {
  if (text == "scalar") return Isa::kScalar;
  if (text == "avx2") return Isa::kAvx2;
  if (text == "avx512") return Isa::kAvx512;
  throw_invalid_argument(std::string(what) + "='" + std::string(text) +
                         "' is not an instruction-set path; expected scalar, avx2 or avx512");
}

Isa active_isa() {
  const int current = g_active.load(std::memory_order_acquire);
  if (current >= 0) return static_cast<Isa>(current);
  std::call_once(g_env_once, [] {
    const char* env = std::getenv("DITTO_ISA");
    Isa isa = detect_isa();
    if (env != nullptr && *env != '\0') {
      isa = parse_isa(env, "DITTO_ISA");
      check_supported(isa, "DITTO_ISA");
    }
    int expected = -1;
    g_active.compare_exchange_strong(expected, static_cast<int>(isa));
  });
  return static_cast<Isa>(g_active.load(std::memory_order_acquire));
}

void set_active_isa(Isa isa) {
  check_supported(isa, "isa");
  g_active.store(static_cast<int>(isa), std::memory_order_release);
}

std::string isa_description() {
  std::string s = "isa " + std::string(isa_name(active_isa())) + " (cpu supports " +
                  std::string(isa_name(detect_isa()));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512bf16")) s += "; avx512_bf16 present, not used";
#endif
  return s + ")";
}

}  // namespace ditto
