#include "kernels/kernel_tuning.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/gemm.h"

namespace ditto {
namespace {

std::optional<int64_t> env_bytes(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_prefetch_bytes(name, v);
}

struct State {
  std::optional<int64_t> env_gemv = env_bytes("DITTO_GEMV_PREFETCH");
  std::optional<int64_t> env_qgemv = env_bytes("DITTO_QGEMV_PREFETCH");
  std::atomic<int64_t> gemv{env_gemv.value_or(KernelTuning{}.gemv_prefetch_bytes)};
  std::atomic<int64_t> gemm{KernelTuning{}.gemm_prefetch_bytes};
  std::atomic<int64_t> qgemv{env_qgemv.value_or(KernelTuning{}.qgemv_prefetch_bytes)};
  std::mutex mutex;  // guards everything below; held for a whole tuning
  std::vector<PrefetchTuning> last;
  bool measured[2] = {false, false};  // bf16, quantized: measured once per process
};

State& state() {
  static State s;
  return s;
}

constexpr int64_t kTuneMinBytes = int64_t{64} << 20;  // below: the matrices would sit in the cache
constexpr int64_t kTuneMaxBytes = int64_t{96} << 20;  // per pass
constexpr int kRounds = 3;
constexpr int64_t kCandidates[] = {0, 256, 512, 1024, 2048, 4096};

// The fastest of kRounds interleaved passes per candidate over `set`, installed by `install`.
PrefetchTuning measure(const char* kind, const std::vector<const PackedMatrix*>& set, ThreadPool* pool,
                       const std::function<void(int64_t)>& install) {
  int64_t bytes = 0, max_k = 0, max_n = 0;
  for (const PackedMatrix* w : set) {
    bytes += w->weight_bytes();
    max_k = std::max(max_k, w->k);
    max_n = std::max(max_n, w->n);
  }
  std::vector<float> x(static_cast<size_t>(max_k), 0.5f);  // [max_k] f32
  std::vector<float> y(static_cast<size_t>(max_n));        // [max_n] f32
  auto pass = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (const PackedMatrix* w : set) gemm(x.data(), 1, w->k, *w, y.data(), w->n, pool);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  PrefetchTuning result;
  result.weights = kind;
  for (int64_t c : kCandidates) result.trials.push_back({c, 0.0});
  install(kCandidates[0]);
  pass();  // warm-up: thread wake-up, the x buffers, page tables
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < result.trials.size(); ++i) {
      // Each round starts at another candidate, so a slow stretch of the machine is spread over them.
      PrefetchTrial& trial = result.trials[(i + static_cast<size_t>(round)) % result.trials.size()];
      install(trial.bytes);
      trial.bytes_per_s = std::max(trial.bytes_per_s, static_cast<double>(bytes) / pass());
    }
  }
  const auto best =
      std::max_element(result.trials.begin(), result.trials.end(),
                       [](const PrefetchTrial& a, const PrefetchTrial& b) { return a.bytes_per_s < b.bytes_per_s; });
  result.chosen_bytes = best->bytes;
  install(result.chosen_bytes);
  return result;
}

// Matrices of one kind, in the given order, up to kTuneMaxBytes; empty if all of them together are
// under kTuneMinBytes.
std::vector<const PackedMatrix*> pick(std::span<const PackedMatrix* const> weights, bool quantized) {
  std::vector<const PackedMatrix*> set;
  int64_t total = 0, taken = 0;
  for (const PackedMatrix* w : weights) {
    if (w == nullptr || w->n == 0 || (w->quant != QuantType::kNone) != quantized) continue;
    if (!quantized && w->dtype != DType::kBF16) continue;  // f16/f32 weights do not prefetch
    total += w->weight_bytes();
    if (taken < kTuneMaxBytes) {
      set.push_back(w);
      taken += w->weight_bytes();
    }
  }
  if (total < kTuneMinBytes) set.clear();
  return set;
}

}  // namespace

size_t weight_chunk_groups(size_t num_groups, size_t group_bytes, const ThreadPool& pool) {
  const size_t by_bytes = (size_t{256} << 10) / std::max<size_t>(group_bytes, 1);
  const size_t by_count = num_groups / (size_t{8} * static_cast<size_t>(std::max(pool.num_threads(), 1)));
  return std::max<size_t>(1, std::min(by_bytes, by_count));
}

int64_t parse_prefetch_bytes(const char* name, const char* value) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno != 0 || n < 0 || n > kMaxPrefetchBytes)
    throw_invalid_argument(std::string(name) + " must be a byte count in [0, " + std::to_string(kMaxPrefetchBytes) +
                           "] (0: no prefetch), got '" + value + "'");
  return n;
}

KernelTuning kernel_tuning() {
  State& s = state();
  return {.gemv_prefetch_bytes = s.gemv.load(std::memory_order_relaxed),
          .gemm_prefetch_bytes = s.gemm.load(std::memory_order_relaxed),
          .qgemv_prefetch_bytes = s.qgemv.load(std::memory_order_relaxed)};
}

void set_kernel_tuning(const KernelTuning& t) {
  State& s = state();
  s.gemv.store(s.env_gemv.value_or(t.gemv_prefetch_bytes), std::memory_order_relaxed);
  s.gemm.store(t.gemm_prefetch_bytes, std::memory_order_relaxed);
  s.qgemv.store(s.env_qgemv.value_or(t.qgemv_prefetch_bytes), std::memory_order_relaxed);
}

std::vector<PrefetchTuning> tune_gemv_prefetch(std::span<const PackedMatrix* const> weights, ThreadPool* pool) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<PrefetchTuning> results;
  if (active_isa() == Isa::kScalar) return results;  // the portable path never prefetches
  for (const bool quantized : {false, true}) {
    const std::vector<const PackedMatrix*> set = pick(weights, quantized);
    if (set.empty() || s.measured[quantized]) continue;
    s.measured[quantized] = true;
    const char* kind = quantized ? "quantized" : "bf16";
    const std::optional<int64_t>& fixed = quantized ? s.env_qgemv : s.env_gemv;
    if (fixed) {
      results.push_back({.weights = kind, .chosen_bytes = *fixed, .from_environment = true, .trials = {}});
      continue;
    }
    std::atomic<int64_t>& slot = quantized ? s.qgemv : s.gemv;
    results.push_back(measure(kind, set, pool, [&](int64_t b) { slot.store(b, std::memory_order_relaxed); }));
  }
  for (const PrefetchTuning& r : results) {
    std::erase_if(s.last, [&](const PrefetchTuning& old) { return old.weights == r.weights; });
    s.last.push_back(r);
  }
  return results;
}

std::vector<PrefetchTuning> last_prefetch_tuning() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.last;
}

}  // namespace ditto
