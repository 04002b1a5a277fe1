// The machine's limits, measured in the same process as the code they judge: main-memory read
// bandwidth (the bound of batch-1 decode, which streams every weight once per token) and the
// float32 FMA peak of the active ISA (the bound of prefill GEMMs). A benchmark reports its speed
// as a ratio to these, so a number means the same on a laptop and on a server, and a noisy
// neighbour slows the limit and the code alike.
//
// Both use every thread of `pool` at once (null: the calling thread only), run the widest path of
// active_isa() (function-level target attributes; a portable loop for kScalar and off x86-64),
// and report the fastest of several timed passes after a warm-up (bench/timing.h).
// Thread-safety: one measurement at a time per pool (each runs a parallel_for on it).
#pragma once

#include <cstdint>
#include <memory>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace ditto {

// 1 GiB: 32× this machine's L3, so a pass is a stream from DRAM, not from cache.
inline constexpr int64_t kReadBandwidthBufferBytes = int64_t{1} << 30;
// 128 MiB a pass: 4× L3, as much as a kernel benchmark's pass reads (bench/kernels_bench.cc).
inline constexpr int64_t kReadBandwidthPassBytes = int64_t{128} << 20;

// Streaming read bandwidth of main memory, in bytes/s (1 GB/s = 1e9 bytes/s).
// Method: a buffer of `buffer_bytes` (2 MiB aligned, transparent huge pages requested) holds
// windows of `pass_bytes`, each split into one contiguous part per thread (a multiple of 4 KiB),
// every part first written by the thread that will read it. A pass reads the next window in turn:
// every thread XORs its part into eight independent accumulators with aligned loads as wide as
// the ISA allows (64 bytes on avx512, 32 on avx2, 8 on scalar); the window a pass reads was last
// read buffer_bytes − pass_bytes bytes earlier, so it is not in cache. Bandwidth = pass_bytes ÷
// wall time of the fastest of 64 passes after one round of warm-up passes.
// Why passes as short as a kernel's (~3 ms here): on a shared machine a short pass is more likely
// to fit between a neighbour's time slices, so the fastest of many short passes is faster than
// the fastest of a few long ones; the limit and the kernel it judges must be timed alike.
// The meter holds the buffer (buffer_bytes of resident memory while it lives), so a benchmark
// that measures around each of its rows allocates and first-touches it once.
class ReadBandwidthMeter {
 public:
  // Allocates and first-touches the buffer. Throws Error(kInvalidArgument) if a pass is under
  // 4 KiB per thread, Error(kResourceExhausted) if the buffer cannot be allocated.
  explicit ReadBandwidthMeter(ThreadPool* pool, int64_t buffer_bytes = kReadBandwidthBufferBytes,
                              int64_t pass_bytes = kReadBandwidthPassBytes);
  // Bytes/s: the fastest of 64 passes after one round of warm-up passes (under the active_isa()
  // of the call).
  double measure();
  // Bytes/s of one pass over the next window, for interleaving with a kernel's own passes.
  double pass();

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  uint8_t* part(int64_t window, int thread) const;

  ThreadPool* pool_;
  int64_t part_bytes_ = 0;   // one thread's share of a pass
  int64_t num_windows_ = 0;  // passes' worth of buffer
  int64_t next_window_ = 0;
  std::unique_ptr<uint8_t, FreeDeleter> buffer_;  // [num_windows, threads, part_bytes]
};

// One ReadBandwidthMeter(pool, buffer_bytes, pass_bytes).measure(); the buffer is freed on return.
double measure_read_bandwidth(ThreadPool* pool, int64_t buffer_bytes = kReadBandwidthBufferBytes,
                              int64_t pass_bytes = kReadBandwidthPassBytes);

// Peak float32 FMA throughput of active_isa(), in FLOP/s (one FMA = 2 FLOPs per lane).
// Method: every thread runs acc = fma(acc, a, b) on independent accumulators held in registers
// (16 × 16 lanes with 512-bit vfmadd on avx512, 12 × 8 lanes with 256-bit vfmadd on avx2,
// 8 × 1 with std::fma as portable code compiles it on scalar — on x86-64 without -mfma that is a
// libm call, which is what the scalar kernels pay too). Enough accumulators cover the FMA latency
// of every current x86 core, so the loop runs at the issue rate. The iteration count is
// calibrated so one pass takes about 5 ms on one thread (short, like a GEMM pass, for the reason
// given above); FLOP/s = 2 · lanes · accumulators · iterations · threads ÷ wall time of the
// fastest of 20 passes after 1 warm-up pass.
// With kBf16Dot the loop is the instruction of the bf16-weight GEMM (kernels/gemm.h) instead:
// VDPBF16PS (2 multiply-adds per lane, 4 FLOPs) on the avx512 path when avx512_bf16_enabled();
// elsewhere the GEMM emulates that instruction with float32 FMAs, so its peak is the FMA peak.
class FmaPeakMeter {
 public:
  enum class Kind { kFloat32Fma, kBf16Dot };
  // Calibrates the pass length for active_isa() now; every pass runs that path.
  explicit FmaPeakMeter(ThreadPool* pool, Kind kind = Kind::kFloat32Fma);
  // FLOP/s: the fastest of 20 passes after 1 warm-up pass.
  double measure();
  // FLOP/s of one pass, for interleaving with a kernel's own passes.
  double pass();
  // Whether the passes run VDPBF16PS (kBf16Dot on a CPU and path that use it).
  bool bf16_dot() const { return bf16_dot_; }

 private:
  float loop() const;  // one calibrated loop on the calling thread

  ThreadPool* pool_;
  Isa isa_;
  bool bf16_dot_;           // the VDPBF16PS loop
  int64_t iterations_ = 0;  // of the loop, per thread and pass
};

// One FmaPeakMeter(pool).measure().
double measure_fma_peak(ThreadPool* pool);

}  // namespace ditto
