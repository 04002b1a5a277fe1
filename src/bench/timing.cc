#include "bench/timing.h"

#include <algorithm>
#include <vector>

namespace ditto {

RunTimes time_runs(const std::function<void()>& fn, const RepeatPolicy& policy,
                   const std::function<void()>& before_each) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  std::vector<double> times;
  for (int i = 0; i < policy.warmups; ++i) {
    if (before_each) before_each();
    const Clock::time_point t0 = Clock::now();
    fn();
    const double seconds = seconds_since(t0);
    if (seconds_since(start) >= policy.budget_seconds) {
      times.push_back(seconds);  // too slow to repeat: the warm-up is the measurement
      break;
    }
  }
  if (times.empty()) {
    for (int i = 0; i < std::max(policy.repetitions, 1); ++i) {
      if (before_each) before_each();
      const Clock::time_point t0 = Clock::now();
      fn();
      times.push_back(seconds_since(t0));
      if (seconds_since(start) >= policy.budget_seconds) break;
    }
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  RunTimes r;
  r.best_seconds = times.front();
  r.median_seconds = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  r.runs = static_cast<int>(n);
  return r;
}

}  // namespace ditto
