// Choices of the kernels that depend on the CPU and change speed only, never a bit: how far ahead
// the decode GEMVs prefetch their weight streams. Each is measured on this machine when a model
// loads (tune_gemv_prefetch, over the model's own weights), since the CPUs ditto meets disagree:
// a software prefetch 2 KiB ahead took the bf16 GEMV from 0.50–0.80 to 0.80–0.94 of the read
// bandwidth on a Sapphire Rapids, while the hardware prefetchers of other cores follow the same
// streams alone and the extra hints only take load slots.
//
// DITTO_GEMV_PREFETCH / DITTO_QGEMV_PREFETCH (bytes, 0 = none) fix a choice instead of measuring it.
// Thread-safety: every function may be called from any thread; GEMMs running while a tuning is
// installed use the old or the new value, both correct.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"

namespace ditto {

inline constexpr int64_t kMaxPrefetchBytes = 1 << 16;

struct KernelTuning {
  int64_t gemv_prefetch_bytes = 2048;   // bf16 weights, m = 1: bytes ahead of each panel's pair
  int64_t gemm_prefetch_bytes = 2048;   // bf16 weights, 2 ≤ m < 128 (not measured yet)
  int64_t qgemv_prefetch_bytes = 1024;  // GGML-quantized weights, m = 1: bytes ahead of each panel block
};

// How many weight-panel groups of `group_bytes` each one thread of `pool` takes at a time when a
// GEMM's groups are handed out dynamically: about 256 KiB of weights (long sequential streams for
// the prefetchers), but at least 8 chunks per thread, so that a small matrix (a 0.6B model's
// o_proj is 64 panels) does not end as 3 chunks against 2 (a thread idle for a third of the call).
// Never below one group. Speed only: every output is computed whole by one thread.
size_t weight_chunk_groups(size_t num_groups, size_t group_bytes, const ThreadPool& pool);

// A prefetch distance from the environment variable `name`: an integer in [0, kMaxPrefetchBytes].
// Throws Error(kInvalidArgument) naming the variable and the value otherwise.
int64_t parse_prefetch_bytes(const char* name, const char* value);

// The values the kernels use now: the defaults above, or what tune_gemv_prefetch installed; an
// environment override always wins.
KernelTuning kernel_tuning();

// Installs `t` (environment overrides still win). For the tuning itself and for tests.
void set_kernel_tuning(const KernelTuning& t);

// One candidate distance and the weight bytes/s its fastest pass read.
struct PrefetchTrial {
  int64_t bytes = 0;
  double bytes_per_s = 0;
};

// What tune_gemv_prefetch measured for one kind of weights (bf16 or quantized).
struct PrefetchTuning {
  std::string weights;  // "bf16" or "quantized"
  int64_t chosen_bytes = 0;
  bool from_environment = false;  // the environment fixed it; trials is empty
  std::vector<PrefetchTrial> trials;
};

// Times the m = 1 GEMM over `weights` (a model's own matrices, read in turn so that they come from
// memory) for each candidate prefetch distance — none, 256 B … 4 KiB — in interleaved rounds, and
// installs the fastest for each kind present (bf16, quantized). A kind is measured once per process;
// kinds whose matrices hold under 64 MiB (they would sit in the cache, not stream from memory) keep
// the current value. Costs 19 passes over at most 96 MiB per kind (~0.1 s at 20 GB/s). Returns what
// it measured now (empty if nothing was, and always on the portable path, which never prefetches).
std::vector<PrefetchTuning> tune_gemv_prefetch(std::span<const PackedMatrix* const> weights, ThreadPool* pool);

// Every kind tune_gemv_prefetch has measured (or found fixed) in this process.
std::vector<PrefetchTuning> last_prefetch_tuning();

}  // namespace ditto
