// A fixed pool of worker threads running one parallel loop at a time.
//
// Invariance: parallel_for only decides *which thread* computes an index, never how a value is
// computed; kernels parallelise over independent outputs (rows, columns, heads), so results are
// bit-identical for any thread count.
// Thread-safety: one parallel_for at a time per pool (calls from several threads are serialised).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ditto {

class ThreadPool {
 public:
  static constexpr int kMaxThreads = 1024;

  // num_threads in [1, kMaxThreads] counts the calling thread: ThreadPool(1) starts no worker.
  // Throws Error(kInvalidArgument) outside that range, Error(kResourceExhausted) if the OS
  // refuses to start the threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on contiguous, disjoint chunks covering [0, n), one chunk per thread
  // (fewer when n is small), and returns when all are done. Rethrows the first exception.
  void parallel_for(size_t n, const std::function<void(size_t begin, size_t end)>& fn);

  // Like parallel_for, but threads take chunks of `grain` indices from a shared counter until
  // none are left, so a thread slowed by other load does not hold the others up. Which thread
  // runs an index still never changes what is computed for it. With one thread, or n ≤ grain,
  // fn is called once with [0, n).
  void parallel_for_dynamic(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& fn);

 private:
  void worker_loop(int index);
  void stop_workers();
  void run_chunk(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // serialises parallel_for callers
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) to start a loop
  std::atomic<int> pending_{0};          // workers still running the current loop
  bool stop_ = false;
  std::exception_ptr error_;
};

// Default thread count: $DITTO_NUM_THREADS if set, else the cores this process may run on
// (sched_getaffinity: taskset, or an MPI launcher binding each rank to its cores).
int default_num_threads();

}  // namespace ditto
