#include "bench/machine_limits.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench/timing.h"
#include "core/cpu_features.h"
#include "core/error.h"

namespace ditto {
namespace {

constexpr int64_t kPartAlignment = 4096;       // per-thread part: whole pages, whole unrolled loops
constexpr int64_t kBufferAlignment = 2 << 20;  // one transparent huge page
constexpr int kBandwidthPasses = 64;
constexpr double kFmaPassSeconds = 0.005;
constexpr int kFmaPasses = 20;

// Results are folded into this so the compiler cannot drop the loops that produce them.
std::atomic<uint64_t> g_sink{0};
// The FMA loops' operands come from here, so constant folding cannot evaluate the loops.
volatile float g_one = 1.0f;

int num_threads(ThreadPool* pool) { return pool != nullptr ? pool->num_threads() : 1; }

// Runs fn(thread) once on each of the pool's threads (or on the caller without a pool).
void on_every_thread(ThreadPool* pool, const std::function<void(int)>& fn) {
  if (pool == nullptr) return fn(0);
  pool->parallel_for(static_cast<size_t>(pool->num_threads()), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) fn(static_cast<int>(t));
  });
}

// --- Streaming reads: XOR every 8-byte word of [p, p + bytes) into 8 accumulators. bytes is a
// multiple of kPartAlignment and p is 64-byte aligned.

uint64_t read_portable_fold(const uint64_t (&a)[8]) { return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7]; }

uint64_t read_portable(const uint8_t* p, int64_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a[8] = {};
  for (int64_t i = 0; i < bytes / 8; i += 8)
    for (int j = 0; j < 8; ++j) a[j] ^= w[i + j];
  return read_portable_fold(a);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, int64_t bytes) {
  __m256i a[8];
  for (auto& v : a) v = _mm256_setzero_si256();
  for (int64_t i = 0; i < bytes; i += 8 * 32)
    for (int j = 0; j < 8; ++j)
      a[j] = _mm256_xor_si256(a[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32 * j)));
  for (int j = 1; j < 8; ++j) a[0] = _mm256_xor_si256(a[0], a[j]);
  alignas(32) uint64_t lanes[8] = {};
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a[0]);
  return read_portable_fold(lanes);
}

__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, int64_t bytes) {
  __m512i a[8];
  for (auto& v : a) v = _mm512_setzero_si512();
  for (int64_t i = 0; i < bytes; i += 8 * 64)
    for (int j = 0; j < 8; ++j) a[j] = _mm512_xor_si512(a[j], _mm512_load_si512(p + i + 64 * j));
  for (int j = 1; j < 8; ++j) a[0] = _mm512_xor_si512(a[0], a[j]);
  // Stored and folded by hand: GCC 12's _mm512_reduce_* warn (-Wuninitialized) in their headers.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, a[0]);
  return read_portable_fold(lanes);
}
#endif

uint64_t read_part(Isa isa, const uint8_t* p, int64_t bytes) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return read_avx512(p, bytes);
  if (isa == Isa::kAvx2) return read_avx2(p, bytes);
#endif
  (void)isa;
  return read_portable(p, bytes);
}

// --- FMA loops: `iterations` rounds of acc = fma(acc, a, b) on independent accumulators. With
// a = b = 0.5 and acc starting at 1 every value stays exactly 1: no denormals, no overflow, and
// the same cost as any other operands. The operands are read from g_one at run time.

constexpr int kPortableAccumulators = 8;
constexpr int kAvx2Accumulators = 12;    // 16 ymm registers: 12 accumulators + a + b
constexpr int kAvx512Accumulators = 16;  // of 32 zmm registers

float fma_portable(int64_t iterations) {
  const float one = g_one;
  float acc[kPortableAccumulators];
  for (float& v : acc) v = one;
  const float a = one * 0.5f, b = a;
  for (int64_t i = 0; i < iterations; ++i)
    for (float& v : acc) v = std::fma(v, a, b);
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iterations) {
  __m256 acc[kAvx2Accumulators];
  const float one = g_one;
  for (auto& v : acc) v = _mm256_set1_ps(one);
  const __m256 a = _mm256_set1_ps(one * 0.5f), b = a;
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  for (int j = 1; j < kAvx2Accumulators; ++j) acc[0] = _mm256_add_ps(acc[0], acc[j]);
  return _mm256_cvtss_f32(acc[0]);
}

__attribute__((target("avx512f,fma"))) float fma_avx512(int64_t iterations) {
  __m512 acc[kAvx512Accumulators];
  const float one = g_one;
  for (auto& v : acc) v = _mm512_set1_ps(one);
  const __m512 a = _mm512_set1_ps(one * 0.5f), b = a;
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  for (int j = 1; j < kAvx512Accumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0];  // every lane holds the same value
}

// VDPBF16PS on 16 accumulators: pairs x = (1, −1), w = (1, 1) add −1 then +1 (odd element
// first), so every accumulator stays exactly 1.
__attribute__((target("avx512f,avx512bf16"))) float bf16_dot_avx512(int64_t iterations) {
  __m512 acc[kAvx512Accumulators];
  const float one = g_one;
  for (auto& v : acc) v = _mm512_set1_ps(one);
  const uint32_t plus_one = 0x3f80u * static_cast<uint32_t>(one), minus_one = 0xbf80u * static_cast<uint32_t>(one);
  const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(plus_one | (minus_one << 16))));
  const __m512bh w = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(plus_one | (plus_one << 16))));
  for (int64_t i = 0; i < iterations; ++i)
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, x, w);
  for (int j = 1; j < kAvx512Accumulators; ++j) acc[0] = _mm512_add_ps(acc[0], acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  return lanes[0];
}
#endif

float fma_loop(Isa isa, int64_t iterations) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return fma_avx512(iterations);
  if (isa == Isa::kAvx2) return fma_avx2(iterations);
#endif
  (void)isa;
  return fma_portable(iterations);
}

// FMAs one fma_loop iteration performs, counted per lane.
int64_t lane_fmas_per_iteration(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return int64_t{kAvx512Accumulators} * 16;
  if (isa == Isa::kAvx2) return int64_t{kAvx2Accumulators} * 8;
#endif
  (void)isa;
  return kPortableAccumulators;
}

}  // namespace

void ReadBandwidthMeter::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

ReadBandwidthMeter::ReadBandwidthMeter(ThreadPool* pool, int64_t buffer_bytes, int64_t pass_bytes) : pool_(pool) {
  const int threads = num_threads(pool);
  pass_bytes = std::min(pass_bytes, buffer_bytes);
  part_bytes_ = pass_bytes / threads / kPartAlignment * kPartAlignment;
  if (part_bytes_ <= 0)
    throw_invalid_argument("read bandwidth: " + std::to_string(pass_bytes) +
                           " bytes per pass is under 4 KiB per thread (" + std::to_string(threads) + " threads)");
  num_windows_ = std::max<int64_t>(1, buffer_bytes / (part_bytes_ * threads));
  const int64_t total = part_bytes_ * threads * num_windows_;
  const int64_t allocated = (total + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  buffer_.reset(static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, static_cast<size_t>(allocated))));
  if (!buffer_)
    throw_error(ErrorCode::kResourceExhausted,
                "read bandwidth: cannot allocate " + std::to_string(allocated) + " bytes");
  // Huge pages keep TLB misses out of the measurement; a kernel without THP just ignores this.
  madvise(buffer_.get(), static_cast<size_t>(allocated), MADV_HUGEPAGE);
  // First touch by the reading thread places each part on that thread's memory node.
  on_every_thread(pool, [&](int t) {
    for (int64_t w = 0; w < num_windows_; ++w) std::memset(part(w, t), 0x5a + t, static_cast<size_t>(part_bytes_));
  });
}

uint8_t* ReadBandwidthMeter::part(int64_t window, int thread) const {
  return buffer_.get() + (window * num_threads(pool_) + thread) * part_bytes_;
}

double ReadBandwidthMeter::pass() {
  const Isa isa = active_isa();
  const int64_t window = next_window_;
  next_window_ = (next_window_ + 1) % num_windows_;
  const auto t0 = std::chrono::steady_clock::now();
  on_every_thread(
      pool_, [&](int t) { g_sink.fetch_xor(read_part(isa, part(window, t), part_bytes_), std::memory_order_relaxed); });
  return static_cast<double>(part_bytes_ * num_threads(pool_)) / seconds_since(t0);
}

double ReadBandwidthMeter::measure() {
  for (int64_t w = 0; w < num_windows_; ++w) pass();  // warm-up: one round of the windows
  double best = 0;
  for (int i = 0; i < kBandwidthPasses; ++i) best = std::max(best, pass());
  return best;
}

double measure_read_bandwidth(ThreadPool* pool, int64_t buffer_bytes, int64_t pass_bytes) {
  return ReadBandwidthMeter(pool, buffer_bytes, pass_bytes).measure();
}

FmaPeakMeter::FmaPeakMeter(ThreadPool* pool, Kind kind)
    : pool_(pool),
      isa_(active_isa()),
      bf16_dot_(kind == Kind::kBf16Dot && isa_ == Isa::kAvx512 && avx512_bf16_enabled()) {
  // Calibrate on the calling thread: grow the count until one loop takes kFmaPassSeconds.
  iterations_ = 1 << 12;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    g_sink.fetch_xor(static_cast<uint64_t>(loop()), std::memory_order_relaxed);
    const double s = seconds_since(t0);
    if (s >= kFmaPassSeconds || iterations_ >= (int64_t{1} << 40)) break;
    // Jump most of the way at once (a first loop of a few µs is too noisy to extrapolate far).
    iterations_ *= s > kFmaPassSeconds / 16 ? 2 : 8;
  }
}

double FmaPeakMeter::pass() {
  const auto t0 = std::chrono::steady_clock::now();
  on_every_thread(pool_, [&](int) { g_sink.fetch_xor(static_cast<uint64_t>(loop()), std::memory_order_relaxed); });
  const double seconds = seconds_since(t0);
  // VDPBF16PS: two multiply-adds per lane.
  const double lane_flops = bf16_dot_ ? 4.0 * kAvx512Accumulators * 16 : 2.0 * lane_fmas_per_iteration(isa_);
  return lane_flops * static_cast<double>(iterations_) * num_threads(pool_) / seconds;
}

double FmaPeakMeter::measure() {
  pass();  // warm-up
  double best = 0;
  for (int i = 0; i < kFmaPasses; ++i) best = std::max(best, pass());
  return best;
}

float FmaPeakMeter::loop() const {
#if defined(__x86_64__)
  if (bf16_dot_) return bf16_dot_avx512(iterations_);
#endif
  return fma_loop(isa_, iterations_);
}

double measure_fma_peak(ThreadPool* pool) { return FmaPeakMeter(pool).measure(); }

}  // namespace ditto
