#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ditto {
namespace {

// -1: not decided yet.
std::atomic<int> g_active{-1};
std::once_flag g_env_once;
// Optional instructions of the avx512 path: -1 not decided yet; 0/1 allowed.
std::atomic<int> g_vnni_allowed{-1};
std::atomic<int> g_bf16_allowed{-1};

// libgcc's __builtin_cpu_supports checks the CPUID bits and, for AVX/AVX-512, that the OS saves
// the wider registers (XGETBV), so a "true" here means the instructions will not fault.
bool this_cpu_has(std::string_view feature) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (feature == "avx2") return __builtin_cpu_supports("avx2");
  if (feature == "fma") return __builtin_cpu_supports("fma");
  if (feature == "f16c") {  // CPUID.1:ECX.F16C (clang's __builtin_cpu_supports lacks the name; the
                            // OS state it needs is AVX's, checked with avx2 on every path that uses it)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (feature == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (feature == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (feature == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  if (feature == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
#endif
  (void)feature;
  return false;
}

void check_supported(Isa isa, std::string_view origin) {
  const std::string message = detail::unsupported_message(isa, origin, this_cpu_has);
  if (!message.empty()) throw_invalid_argument(message);
}

}  // namespace

namespace detail {

const char* missing_feature(Isa isa, CpuHasFn has) {
#if !defined(__x86_64__)
  if (isa != Isa::kScalar) return "an x86-64 CPU";
#endif
  static constexpr const char* kAvx2[] = {"avx2", "fma", "f16c"};
  static constexpr const char* kAvx512[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512dq", "avx512vl"};
  if (isa == Isa::kAvx2)
    for (const char* f : kAvx2)
      if (!has(f)) return f;
  if (isa == Isa::kAvx512)
    for (const char* f : kAvx512)
      if (!has(f)) return f;
  return nullptr;
}

std::string unsupported_message(Isa isa, std::string_view origin, CpuHasFn has) {
  const char* missing = missing_feature(isa, has);
  if (missing == nullptr) return "";
  std::string usable = "scalar";
  if (missing_feature(Isa::kAvx2, has) == nullptr) usable += ", avx2";
  if (missing_feature(Isa::kAvx512, has) == nullptr) usable += ", avx512";
  return std::string(origin) + "=" + std::string(isa_name(isa)) + ": this CPU cannot run that path (it lacks " +
         missing + "); use one of: " + usable;
}

}  // namespace detail

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool cpu_supports(Isa isa) { return detail::missing_feature(isa, this_cpu_has) == nullptr; }

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

// The CPU does not change while the process runs: asked once (the quantized GEMM asks per call,
// and CPUID with the string compares cost 9 % of a small model's decode).
bool cpu_has_avx512_vnni() {
  static const bool has = cpu_supports(Isa::kAvx512) && this_cpu_has("avx512vnni");
  return has;
}

namespace {

// Whether an optional instruction of the avx512 path is allowed: `allowed` once decided, else
// decided now from $env ("0" forbids it; read once).
bool optional_allowed(std::atomic<int>& allowed, const char* env) {
  int value = allowed.load(std::memory_order_acquire);
  if (value < 0) {
    const char* text = std::getenv(env);
    int expected = -1;
    allowed.compare_exchange_strong(expected, text != nullptr && std::string_view(text) == "0" ? 0 : 1);
    value = allowed.load(std::memory_order_acquire);
  }
  return value == 1;
}

}  // namespace

bool avx512_vnni_enabled() { return optional_allowed(g_vnni_allowed, "DITTO_AVX512_VNNI") && cpu_has_avx512_vnni(); }

void set_avx512_vnni_allowed(bool allowed) { g_vnni_allowed.store(allowed ? 1 : 0, std::memory_order_release); }

bool cpu_has_avx512_bf16() {
  static const bool has = cpu_supports(Isa::kAvx512) && this_cpu_has("avx512bf16");
  return has;
}

namespace {

#if defined(__x86_64__)
// 16 independent accumulators, `iterations` rounds; x = (1, −1), w = (1, 1) keep every value 1.
__attribute__((target("avx512f,avx512bf16"))) float time_bf16_dots(int64_t iterations) {
  __m512 acc[16];
  for (auto& v : acc) v = _mm512_set1_ps(1.0f);
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(0xbf803f80u)));
  const __m512bh w = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(0x3f803f80u)));
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, x, w);
  for (int j = 1; j < 16; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f,fma"))) float time_fmas(int64_t iterations) {
  __m512 acc[16];
  for (auto& v : acc) v = _mm512_set1_ps(1.0f);
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& v : acc) v = _mm512_fmadd_ps(v, half, half);
  for (int j = 1; j < 16; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return _mm512_cvtss_f32(acc[0]);
}

// Whether the GEMM is faster with VDPBF16PS than with its FMA emulation on this core, judged by the
// instructions' multiply-add rates (timed once, best of 5 alternating runs of ~0.2 ms each): the
// emulation's GEMM reaches about 0.65 of the FMA rate (it also unpacks the weight pairs), the
// native one about 0.85 of VDPBF16PS's, so VDPBF16PS pays from 0.8 of the FMA rate on. Some cores
// issue it at a quarter of the FMA instruction rate (half the multiply-adds); others at the same
// instruction rate (twice the multiply-adds).
bool bf16_dots_outpace_fmas() {
  static const bool faster = [] {
    constexpr int64_t kIterations = 8192;
    double best_dot = 1e30, best_fma = 1e30;
    volatile float sink = 0;
    for (int round = 0; round < 5; ++round) {
      auto t0 = std::chrono::steady_clock::now();
      sink = sink + time_bf16_dots(kIterations);
      best_dot = std::min(best_dot, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      t0 = std::chrono::steady_clock::now();
      sink = sink + time_fmas(kIterations);
      best_fma = std::min(best_fma, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // Per instruction: VDPBF16PS does 32 multiply-adds, an FMA 16.
    return 32.0 / best_dot > 0.8 * 16.0 / best_fma;
  }();
  return faster;
}
#endif

}  // namespace

// g_bf16_allowed: 0 off, 1 on; undecided (-1) becomes 0 for DITTO_AVX512_BF16=0, 1 for =1, else 2:
// on where bf16_dots_outpace_fmas().
bool avx512_bf16_enabled() {
  int value = g_bf16_allowed.load(std::memory_order_acquire);
  if (value < 0) {
    const char* text = std::getenv("DITTO_AVX512_BF16");
    const std::string_view env = text == nullptr ? "" : text;
    int expected = -1;
    g_bf16_allowed.compare_exchange_strong(expected, env == "0" ? 0 : env == "1" ? 1 : 2);
    value = g_bf16_allowed.load(std::memory_order_acquire);
  }
  if (value == 0 || !cpu_has_avx512_bf16()) return false;
#if defined(__x86_64__)
  return value == 1 || bf16_dots_outpace_fmas();
#else
  return false;
#endif
}

void set_avx512_bf16_allowed(bool allowed) { g_bf16_allowed.store(allowed ? 1 : 0, std::memory_order_release); }

std::string isa_description() {
  std::string s =
      "isa " + std::string(isa_name(active_isa())) + " (cpu supports " + std::string(isa_name(detect_isa()));
#if defined(__x86_64__)
  if (active_isa() == Isa::kAvx512 && avx512_vnni_enabled()) s += "; avx512_vnni for quantized weights";
  if (active_isa() == Isa::kAvx512 && avx512_bf16_enabled()) {
    s += "; avx512_bf16 for bf16 weights";
  } else if (active_isa() == Isa::kAvx512 && cpu_has_avx512_bf16()) {
    s += "; avx512_bf16 present, its fma emulation used (faster here, same bits)";
  }
#endif
  return s + ")";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "unknown CPU";
}

}  // namespace ditto
