#include "server/connection_queue.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace ditto {
namespace {
thread_local bool t_refusing = false;
}  // namespace

ConnectionQueue::ConnectionQueue(size_t max_threads, size_t max_connections, std::chrono::milliseconds idle_timeout)
    : max_threads_(max_threads), max_connections_(max_connections), idle_timeout_(idle_timeout) {
  if (max_threads < 1) throw_invalid_argument("--http-threads must be at least 1");
  if (max_connections < max_threads)
    throw_invalid_argument("--max-connections (" + std::to_string(max_connections) +
                           ") must be at least --http-threads (" + std::to_string(max_threads) + ")");
}

ConnectionQueue::~ConnectionQueue() { shutdown(); }

bool ConnectionQueue::refusing() { return t_refusing; }

void ConnectionQueue::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  join_exited(lock);
  if (waiting_.size() + active_ < max_connections_) {
    waiting_.push_back(std::move(fn));
    if (idle_ >= waiting_.size()) {
      work_ready_.notify_one();
    } else if (workers_.size() < max_threads_) {
      std::thread t([this] { work(); });
      const std::thread::id id = t.get_id();
      workers_.emplace(id, std::move(t));
      ++idle_;  // counted idle until it takes the connection
    }
    return;
  }
  room_.wait(lock, [this] { return refusals_.size() < kMaxRefusalsWaiting || shutdown_; });
  refusals_.push_back(std::move(fn));
  ++refused_;
  if (!refusal_thread_.joinable()) refusal_thread_ = std::thread([this] { refuse(); });
  refusal_ready_.notify_one();
}

void ConnectionQueue::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const bool got = work_ready_.wait_for(lock, idle_timeout_, [this] { return !waiting_.empty() || shutdown_; });
    if (!got || waiting_.empty()) break;  // idle for idle_timeout, or shut down with nothing left
    std::function<void()> fn = std::move(waiting_.front());
    waiting_.pop_front();
    --idle_;
    ++active_;
    lock.unlock();
    fn();
    fn = nullptr;  // the connection's state goes before the thread is counted idle
    lock.lock();
    --active_;
    ++idle_;
  }
  --idle_;
  auto self = workers_.find(std::this_thread::get_id());
  exited_.push_back(std::move(self->second));
  workers_.erase(self);
  exited_cv_.notify_all();
}

void ConnectionQueue::refuse() {
  t_refusing = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    refusal_ready_.wait(lock, [this] { return !refusals_.empty() || shutdown_; });
    if (refusals_.empty()) return;
    std::function<void()> fn = std::move(refusals_.front());
    refusals_.pop_front();
    room_.notify_one();
    lock.unlock();
    fn();
    fn = nullptr;
    lock.lock();
  }
}

void ConnectionQueue::join_exited(std::unique_lock<std::mutex>& lock) {
  std::vector<std::thread> done;
  done.swap(exited_);
  if (done.empty()) return;
  lock.unlock();
  for (std::thread& t : done) t.join();
  lock.lock();
}

void ConnectionQueue::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  shutdown_ = true;
  work_ready_.notify_all();
  refusal_ready_.notify_all();
  room_.notify_all();
  exited_cv_.wait(lock, [this] { return workers_.empty(); });
  join_exited(lock);
  std::thread refusal = std::move(refusal_thread_);
  lock.unlock();
  if (refusal.joinable()) refusal.join();
}

size_t ConnectionQueue::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return workers_.size();
}

size_t ConnectionQueue::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_.size() + active_;
}

size_t ConnectionQueue::refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

}  // namespace ditto
