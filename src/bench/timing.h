// Wall-clock timing for benchmarks on a shared, noisy machine: warm up, repeat, keep the fastest.
//
// Noise from other processes only ever makes a run slower, so the fastest of a few runs is the
// best estimate of what the code itself can do; the median is kept as well, to show how noisy the
// machine was. A time budget bounds how long a slow path (e.g. the scalar kernels) is repeated.
// Thread-safety: time_runs calls fn on the calling thread only.
#pragma once

#include <chrono>
#include <functional>
#include <limits>

namespace ditto {

struct RepeatPolicy {
  int warmups = 1;      // untimed calls first (caches, page tables, thread wake-up, clocks)
  int repetitions = 3;  // timed calls, at most
  // Once warm-ups and timed calls together have taken this long, no further call starts; at least
  // one call is always timed. A warm-up that alone uses the whole budget is itself counted as the
  // one timed call (a path that slow gains nothing measurable from warming up), so a slow path
  // costs one call, not two.
  double budget_seconds = std::numeric_limits<double>::infinity();
};

struct RunTimes {
  double best_seconds = 0;    // the fastest timed call
  double median_seconds = 0;  // median of the timed calls (mean of the middle two when even)
  int runs = 0;               // timed calls
};

// Times fn under `policy`. `before_each` (if set) runs before every call of fn, warm-ups included,
// untimed but counted against the budget: e.g. one pass of the limit fn is judged by, so that
// limit and fn sample the same moments of a noisy machine. Rethrows what either throws.
RunTimes time_runs(const std::function<void()>& fn, const RepeatPolicy& policy,
                   const std::function<void()>& before_each = nullptr);

// Seconds elapsed since t0 on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ditto
