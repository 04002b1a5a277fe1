// How `ditto serve` holds its connections: the task queue cpp-httplib hands each accepted
// connection to. A connection is served by one HTTP thread for its whole life (a stream holds its
// thread until the last event), so the threads bound how many clients are served at once; the
// connections waiting for a thread are bounded too, and beyond both the server answers 503 at once
// rather than letting the backlog grow without limit.
//
//   - At most `max_threads` connections are served at once. Threads start when connections come and
//     no thread is free, and exit after `idle_timeout` without work, so a burst's threads (their
//     stacks and per-thread heap caches) are given back once it is over.
//   - At most `max_connections` are held: served, or waiting for a thread. A connection beyond that is
//     served by the refusal thread instead, on which refusing() is true: the server answers its
//     request with 503 and closes it. Refused connections waiting for that thread are bounded as
//     well (kMaxRefusalsWaiting); beyond, enqueue() blocks, which stops the accept loop until the
//     refusal thread catches up, leaving further clients in the kernel's listen backlog.
//
// Thread-safety: enqueue() and shutdown() are called by httplib's accept thread; the counters may
// be read from any thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace ditto {

class ConnectionQueue : public httplib::TaskQueue {
 public:
  static constexpr size_t kMaxRefusalsWaiting = 256;

  // Throws Error(kInvalidArgument) when max_threads < 1 or max_connections < max_threads.
  ConnectionQueue(size_t max_threads, size_t max_connections, std::chrono::milliseconds idle_timeout);
  ~ConnectionQueue() override;
  ConnectionQueue(const ConnectionQueue&) = delete;
  ConnectionQueue& operator=(const ConnectionQueue&) = delete;

  // Serves `fn` (one connection) on an HTTP thread, or on the refusal thread when max_connections
  // are held already.
  void enqueue(std::function<void()> fn) override;
  // Serves every connection already handed over (held or refused), then joins every thread.
  void shutdown() override;

  // True on the refusal thread, while it serves a connection beyond max_connections.
  static bool refusing();

  size_t threads() const;  // HTTP threads alive now (refusal thread not counted)
  size_t held() const;     // connections being served or waiting for a thread
  size_t refused() const;  // connections handed to the refusal thread so far
  size_t max_threads() const { return max_threads_; }
  size_t max_connections() const { return max_connections_; }

 private:
  void work();    // an HTTP thread's loop
  void refuse();  // the refusal thread's loop
  void join_exited(std::unique_lock<std::mutex>& lock);

  const size_t max_threads_;
  const size_t max_connections_;
  const std::chrono::milliseconds idle_timeout_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;     // a connection waits, or shutdown
  std::condition_variable refusal_ready_;  // a refused connection waits, or shutdown
  std::condition_variable room_;           // the refusal queue has room again, or shutdown
  std::condition_variable exited_cv_;      // a thread exited (shutdown waits for all)
  std::deque<std::function<void()>> waiting_;
  std::deque<std::function<void()>> refusals_;
  std::map<std::thread::id, std::thread> workers_;  // alive
  std::vector<std::thread> exited_;                 // finished or finishing, to be joined
  std::thread refusal_thread_;
  size_t idle_ = 0;    // HTTP threads waiting for work
  size_t active_ = 0;  // connections being served by HTTP threads
  size_t refused_ = 0;
  bool shutdown_ = false;
};

}  // namespace ditto
