#include "bench/machine_limits.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu_features.h"
#include "core/error.h"

namespace ditto {
namespace {

// 256 MiB: 8× this machine's L3, enough to measure DRAM and cheaper than the 1 GiB default.
constexpr int64_t kTestBufferBytes = int64_t{256} << 20;

TEST(MachineLimits, ReadBandwidthIsPlausible) {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const double bw = measure_read_bandwidth(p, kTestBufferBytes);
    EXPECT_TRUE(std::isfinite(bw));
    EXPECT_GT(bw, 1e9) << "threads " << (p ? p->num_threads() : 1);  // any machine since ~2000
    EXPECT_LT(bw, 1e13);                                             // no DRAM streams 10 TB/s
  }
}

TEST(MachineLimits, ReadBandwidthMeterMeasuresAgain) {
  ThreadPool pool(2);
  ReadBandwidthMeter meter(&pool, kTestBufferBytes);
  const double first = meter.measure();
  const double second = meter.measure();
  EXPECT_GT(first, 1e9);
  EXPECT_GT(second, 1e9);
}

TEST(MachineLimits, ReadBandwidthRejectsATinyBuffer) {
  ThreadPool pool(2);
  EXPECT_THROW(measure_read_bandwidth(&pool, 4096), Error);
  EXPECT_THROW(ReadBandwidthMeter(&pool, 0), Error);
}

TEST(MachineLimits, ReadBandwidthOnEveryIsa) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!cpu_supports(isa)) continue;
    ScopedIsa scoped(isa);
    EXPECT_GT(measure_read_bandwidth(nullptr, kTestBufferBytes), 1e9) << isa_name(isa);
  }
}

TEST(MachineLimits, FmaPeakIsPlausible) {
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const double peak = measure_fma_peak(p);
    EXPECT_TRUE(std::isfinite(peak));
    EXPECT_GT(peak, 1e8);   // 0.1 GFLOP/s: even a libm fmaf call does better
    EXPECT_LT(peak, 1e14);  // 100 TFLOP/s is far beyond any CPU's pool of 2 threads
  }
}

// Wider vectors must show: each step up doubles the lanes (at least), so even on a noisy
// shared machine the wider path measures well above the narrower one.
TEST(MachineLimits, FmaPeakGrowsWithTheVectorWidth) {
  double scalar = 0;
  {
    ScopedIsa scoped(Isa::kScalar);
    scalar = measure_fma_peak(nullptr);
  }
  if (cpu_supports(Isa::kAvx2)) {
    ScopedIsa scoped(Isa::kAvx2);
    EXPECT_GT(measure_fma_peak(nullptr), 2 * scalar);
  }
  if (cpu_supports(Isa::kAvx512)) {
    ScopedIsa scoped(Isa::kAvx512);
    EXPECT_GT(measure_fma_peak(nullptr), 4 * scalar);
  }
}

}  // namespace
}  // namespace ditto
