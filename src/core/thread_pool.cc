#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <system_error>

#include "core/error.h"
#include "core/step_profile.h"

namespace ditto {
namespace {

// Spins until ready() or kSpin has passed; true if ready. A decode step issues a parallel loop
// every few tens of microseconds, and waking a sleeping thread costs about as much, so threads
// spin briefly before they block.
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  if (num_threads < 1 || num_threads > kMaxThreads)
    throw_invalid_argument("threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                           std::to_string(num_threads));
  try {
    for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (const std::system_error& e) {
    stop_workers();
    throw_error(ErrorCode::kResourceExhausted,
                "cannot start " + std::to_string(num_threads) + " threads (" + e.what() + "); use fewer threads");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  const size_t begin = n_ * index / num_threads_;
  const size_t end = n_ * (index + 1) / num_threads_;
  if (begin >= end) return;
  try {
    (*fn_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // so a waiter cannot miss the notification
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    error_ = nullptr;
    pending_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  run_chunk(0);
  {
    const PhaseTimer wait(StepPhase::kPoolWait);  // hand-off and imbalance, as the caller sees them
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for_dynamic(size_t n, size_t grain, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  grain = std::max<size_t>(grain, 1);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::atomic<size_t> next{0};
  parallel_for(static_cast<size_t>(num_threads_), [&](size_t, size_t) {
    for (;;) {
      const size_t begin = next.fetch_add(grain, std::memory_order_relaxed);
      if (begin >= n) return;
      fn(begin, std::min(n, begin + grain));
    }
  });
}

int default_num_threads() {
  if (const char* env = std::getenv("DITTO_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*env == '\0' || *end != '\0' || n < 1 || n > ThreadPool::kMaxThreads)
      throw_invalid_argument(std::string("DITTO_NUM_THREADS must be an integer in [1, ") +
                             std::to_string(ThreadPool::kMaxThreads) + "], got '" + env + "'");
    return static_cast<int>(n);
  }
  // The cores this process may run on (taskset, or mpirun binding each rank to its cores), else
  // every core the machine has online.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    return std::min(CPU_COUNT(&allowed), ThreadPool::kMaxThreads);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : std::min(static_cast<int>(hw), ThreadPool::kMaxThreads);
}

}  // namespace ditto
